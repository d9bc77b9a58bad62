// The decentralized schemes as an AggregationScheme: each group is encoded
// with the job's compressor (under error feedback and momentum correction,
// as on the centralized route) and aggregated among the workers by the
// scheme's algorithm (worker/decentralized/algorithms.h) over a Collective.
// The exchange runs on the communication thread while the backward pass
// continues; the settlement of the residual waits for OnApplied.
#ifndef SKETCHFUSE_WORKER_SCHEMES_COLLECTIVE_SCHEME_H_
#define SKETCHFUSE_WORKER_SCHEMES_COLLECTIVE_SCHEME_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/aggregation_state.h"
#include "proto/job_config.pb.h"
#include "worker/schemes/aggregation_scheme.h"
#include "worker/collective/collective.h"
#include "worker/decentralized/algorithms.h"
#include "worker/compression/group_compressors.h"
#include "worker/schemes/scheme_registry.h"

namespace sketchfuse {

// The timeline of an algorithm that ran in [begin, end) and spent `decode`
// of it decoding (at its end): "communicate", then "decode".
std::vector<TraceSpan> CollectiveSpans(absl::Time begin, absl::Time end, absl::Duration decode);

class CollectiveScheme final : public AggregationScheme {
 public:
  // The scheme job.run().scheme() over `collective` (not owned; it must
  // outlive the scheme and have the job's world size). INVALID_ARGUMENT for a
  // scheme that is not decentralized, a compressor that does not fit it, or a
  // group size mismatch.
  static absl::StatusOr<std::unique_ptr<CollectiveScheme>> Create(const v1::JobConfig& job, Collective* collective);

  std::string name() const override { return scheme_.name; }
  bool needs_parameters() const override { return scheme_.traits.needs_parameters; }
  // Runs the whole exchange before returning (done included).
  void Exchange(uint64_t step, int group, GradientView grad, absl::Span<const float> params,
                ExchangeDone done) override;
  absl::Status OnApplied(int group, const Update& update) override;
  GroupCompressors::PeelRecovery peel_recovery() const override { return compressors_.peel_recovery(); }
  // The residual and the velocity of each group, and for a group whose
  // method keeps state where the sum is (common/aggregation_state.h) that
  // state, kept identically by every worker.
  absl::Status ScaleResiduals(float factor) override { return compressors_.ScaleResiduals(factor); }
  std::vector<GroupState> SaveState() const override;
  absl::Status RestoreState(const std::vector<GroupState>& state) override;

 private:
  CollectiveScheme(SchemeInfo scheme, GroupCompressors compressors, std::vector<uint64_t> selection,
                   std::vector<uint64_t> reselect, uint32_t rounds, Collective* collective);

  const SchemeInfo scheme_;  // its algorithm runs the exchange
  GroupCompressors compressors_;
  const std::vector<uint64_t> selection_;  // k per group
  const std::vector<uint64_t> reselect_;   // the final round's top k per group (0: all)
  const uint32_t rounds_;  // per step: 2 with the exact second round
  Collective* const collective_;
  std::vector<std::optional<Settlement>> pending_;  // per group, until applied
  // Each group's method state where the sum is (null for methods without
  // one), stepped in place of its decode: every worker steps the same state
  // with the same allreduced sum.
  std::vector<std::unique_ptr<AggregationState>> method_state_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_SCHEMES_COLLECTIVE_SCHEME_H_
