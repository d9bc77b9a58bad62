// --scheme=auto: the hybrid of the two routes. Centralized Count-Sketch
// aggregation (sketch_ps) while the aggregation servers answer; the same
// sketches allreduced among the workers (sketch_allreduce) when they do not.
//
// Each group is encoded once per step. On the centralized route, a push that
// fails past its retry budget fails the group on that worker; at the end of
// the step (Reconcile) the workers allreduce one flag per group, so all of
// them learn which groups failed anywhere, and redo exactly those groups by
// allreducing the payloads they already encoded (sketches are linear: the
// allreduced table is the one the server would have summed). Every worker
// then applies the same updates; no residual has changed before that, so no
// step is lost or applied twice. The workers stay on the decentralized route
// and, every `probe_every` steps, probe every shard's health; when all
// workers see every shard serving (a second one-flag allreduce), they return
// to the centralized route from the next step. Each switch is logged.
#ifndef SKETCHFUSE_WORKER_HYBRID_SCHEME_H_
#define SKETCHFUSE_WORKER_HYBRID_SCHEME_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/coordinator.pb.h"
#include "worker/aggregation_scheme.h"
#include "worker/collective/collective.h"
#include "worker/decentralized/algorithms.h"
#include "worker/group_compressors.h"
#include "worker/ps_transport.h"

namespace sketchfuse {

struct HybridOptions {
  // Steps on the decentralized route between health probes of the shards.
  int probe_every = 20;
  absl::Duration probe_timeout = absl::Seconds(1);
  // Receives one line per route switch (default: standard error).
  std::function<void(const std::string&)> log;
};

class HybridScheme final : public AggregationScheme {
 public:
  enum class Mode { kCentralized, kDecentralized };

  // The joined job must run scheme "auto" with a count_sketch compressor;
  // `collective` (not owned) must outlive the scheme.
  static absl::StatusOr<std::unique_ptr<HybridScheme>> Create(const v1::JoinReply& joined,
                                                              RpcChannelOptions rpc, RetryPolicy policy,
                                                              Collective* collective, HybridOptions options);

  std::string name() const override { return "auto"; }
  void Exchange(uint64_t step, int group, absl::Span<const float> grad, absl::Span<const float> params,
                ExchangeDone done) override;
  absl::Status Reconcile(uint64_t step, std::vector<absl::StatusOr<ExchangeResult>>& results) override;
  absl::Status OnApplied(int group, const Update& update) override;
  std::vector<std::vector<float>> SaveState() const override { return compressors_.SaveState(); }
  absl::Status RestoreState(const std::vector<std::vector<float>>& state) override {
    return compressors_.RestoreState(state);
  }

  // The route the next step takes, and how many switches so far.
  Mode mode() const { return mode_; }
  int switches() const { return switches_; }

 private:
  HybridScheme(std::string job, uint32_t rank, std::vector<uint32_t> group_ids, std::vector<int> shard_of_group,
               GroupCompressors compressors, std::unique_ptr<PsTransport> transport, Collective* collective,
               bool second_round, HybridOptions options);
  // sketch_allreduce of the payload `group` encoded this step.
  absl::StatusOr<ExchangeResult> ExchangeByCollective(uint64_t step, int group);
  void Log(const std::string& line) const;

  const std::string job_;
  const uint32_t rank_;
  const std::vector<uint32_t> group_ids_;
  const std::vector<int> shard_of_group_;
  GroupCompressors compressors_;
  std::unique_ptr<PsTransport> transport_;
  Collective* const collective_;
  const bool second_round_;
  const HybridOptions options_;

  // Written by Exchange (communication thread) and read by Reconcile (trainer
  // thread) only after every group's exchange is done.
  std::vector<Payload> payloads_;        // this step's, per group
  std::vector<absl::Span<const float>> encoded_;  // this step's encoded vectors
  std::vector<size_t> dense_bytes_;
  Mode mode_ = Mode::kCentralized;
  int steps_decentralized_ = 0;
  int switches_ = 0;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_HYBRID_SCHEME_H_
