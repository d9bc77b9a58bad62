// The centralized schemes: each group is encoded with the job's compressor
// (under error feedback when the run asks for it) and exchanged by the
// rounds algorithm (worker/rounds/exchange_rounds.h) bound to the shards
// (worker/rounds/shard_reducer.h): the shard that owns the group sums and
// finishes each round; the final answer is the update.
//   sketch_ps  Count-Sketch payloads, summed on the server, decoded to top-k
//   topk_ps    local top-k, unioned and re-selected on the server (BytePS-style)
//   dense_ps   dense payloads, summed (the uncompressed baseline of this route)
#ifndef SKETCHFUSE_WORKER_SCHEMES_PS_SCHEME_H_
#define SKETCHFUSE_WORKER_SCHEMES_PS_SCHEME_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/coordinator.pb.h"
#include "worker/schemes/aggregation_scheme.h"
#include "worker/compression/group_compressors.h"
#include "worker/rounds/shard_reducer.h"
#include "worker/rpc/ps_transport.h"

namespace sketchfuse {

// The transport to a joined job's shards (INVALID_ARGUMENT for a shard map
// that does not cover the job's groups), and each group's shard.
struct ShardRoute {
  std::vector<std::string> addresses;  // by shard index
  std::vector<int> shard_of_group;     // by group index
};
absl::StatusOr<ShardRoute> RouteToShards(const v1::JoinReply& joined);

// With run.second_round (sketch_ps --second_round, fixed_sketch_ps), each
// group takes two rounds: the sketch round answers with candidates (the heavy
// hitters of the summed sketch), then each worker pushes its exact values
// there, without indices, and applies the exact sums the shard answers (all
// of them, or their top k where the job re-selects: fixed_sketch_ps), so the
// residuals release exactly what was applied. The decentralized schemes run
// the same rounds over the collective (worker/decentralized/
// rounds_allreduce.cc).
class PsScheme final : public AggregationScheme {
 public:
  // Builds one compressor stack per group of the joined job, and the
  // transport `make_transport` makes to its shards (GrpcTransports for a
  // real job). INVALID_ARGUMENT for a job this scheme cannot run, or a
  // transport that does not reach every shard of the job.
  static absl::StatusOr<std::unique_ptr<PsScheme>> Create(const v1::JoinReply& joined,
                                                          const TransportFactory& make_transport);

  std::string name() const override { return scheme_; }
  void Exchange(uint64_t step, int group, GradientView grad, absl::Span<const float> params,
                ExchangeDone done) override;
  // Settles the group's residual: SettleSent by the payload it encoded last
  // (SettleAt with a second round, which summed every worker's values).
  absl::Status OnApplied(int group, const Update& update) override;
  GroupCompressors::PeelRecovery peel_recovery() const override { return compressors_.peel_recovery(); }
  absl::Status ScaleResiduals(float factor) override { return compressors_.ScaleResiduals(factor); }
  std::vector<GroupState> SaveState() const override { return compressors_.SaveState(); }
  // The shards keep what state the method has where the sum is: a saved
  // method state is refused (but a low-rank group's warm start).
  absl::Status RestoreState(const std::vector<GroupState>& state) override;

  // Encodes `group`'s gradient for `step` and keeps the payload (until the
  // group's next encode): what the push sends and what OnApplied settles by.
  // The hybrid encodes through it on either route.
  absl::StatusOr<std::shared_ptr<const Payload>> Encode(uint64_t step, int group, GradientView grad,
                                                        absl::Span<const float> params);

  // For the hybrid (worker/schemes/hybrid_scheme.h), which runs this scheme as its
  // centralized route: the payload `group` encoded for `step` (null if its
  // encode for that step failed), the compressor stacks and the transport.
  const Payload* payload_of(int group, uint64_t step) const {
    return last_payload_steps_[group] == step ? last_payloads_[group].get() : nullptr;
  }
  GroupCompressors& compressors() { return compressors_; }
  PsTransport& transport() { return *transport_; }

 private:
  PsScheme(std::string scheme, std::string job, uint32_t rank, std::vector<uint32_t> group_ids,
           std::vector<int> shard_of_group, GroupCompressors compressors, std::unique_ptr<PsTransport> transport);

  const std::string scheme_;
  const std::string job_;
  const uint32_t rank_;
  const std::vector<uint32_t> group_ids_;
  const std::vector<int> shard_of_group_;
  GroupCompressors compressors_;  // used on the communication thread
  // Per group; shared with the push in flight, which sends its values.
  std::vector<std::shared_ptr<const Payload>> last_payloads_;
  std::vector<uint64_t> last_payload_steps_;  // the step of each (UINT64_MAX: none)
  // Per group, a low-rank method's step: what this worker keeps of what it
  // encoded (RoundsOutcome::kept), set by the exchange, settled by
  // OnApplied.
  std::vector<std::optional<std::vector<float>>> kept_;
  uint32_t rounds_ = 1;  // per step; 2 (run.second_round): exact values at the candidates
  // The k each group applies (JobSelectionSizes): what the release cap of a
  // later round bounds.
  std::vector<uint64_t> selection_;
  std::unique_ptr<ShardReducer> reducer_;  // over transport_
  // Declared last, so destroyed first: its destructor waits for the pushes
  // in flight, whose callbacks (a later round's values, capped, reduced)
  // still find the compressors, the selection and the reducer.
  std::unique_ptr<PsTransport> transport_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_SCHEMES_PS_SCHEME_H_
