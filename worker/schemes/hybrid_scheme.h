// --scheme=auto: the hybrid of the two routes. Centralized Count-Sketch
// aggregation (sketch_ps) while the aggregation servers answer; the same
// sketches allreduced among the workers (sketch_allreduce) when they do not.
// --scheme=fixed_sketch_auto is the same hybrid of fixed_sketch_ps and
// fixed_sketch_allreduce (two rounds on either route).
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
// With two rounds (fixed_sketch_auto), a group fails if either of its rounds
// fails; a worker that never gets its first round's answer never pushes the
// second, so the others' second round fails at the job's round deadline
// (the gRPC transport retries a lost reply first, so this takes a shard
// that stays down), and all redo the group, both rounds, on the collective.
#ifndef SKETCHFUSE_WORKER_SCHEMES_HYBRID_SCHEME_H_
#define SKETCHFUSE_WORKER_SCHEMES_HYBRID_SCHEME_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/coordinator.pb.h"
#include "worker/schemes/aggregation_scheme.h"
#include "worker/collective/collective.h"
#include "worker/decentralized/algorithms.h"
#include "worker/schemes/ps_scheme.h"
#include "worker/schemes/scheme_registry.h"

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

  // The joined job must run a hybrid scheme (auto) with a count_sketch compressor;
  // `collective` (not owned) must outlive the scheme. The centralized route
  // pushes through the transport `make_transport` makes (PsScheme::Create).
  static absl::StatusOr<std::unique_ptr<HybridScheme>> Create(const v1::JoinReply& joined,
                                                              const TransportFactory& make_transport,
                                                              Collective* collective, HybridOptions options);

  std::string name() const override { return scheme_.name; }
  void Exchange(uint64_t step, int group, GradientView grad, absl::Span<const float> params,
                ExchangeDone done) override;
  absl::Status Reconcile(uint64_t step, std::vector<absl::StatusOr<ExchangeResult>>& results) override;
  // Both routes apply the decoded top-k of the same summed sketch, so the
  // settlement is the centralized scheme's.
  absl::Status OnApplied(int group, const Update& update) override {
    return centralized_->OnApplied(group, update);
  }
  GroupCompressors::PeelRecovery peel_recovery() const override { return centralized_->peel_recovery(); }
  // The centralized route's stacks are the only ones (the decentralized
  // route redoes groups with the payloads they encoded).
  absl::Status ScaleResiduals(float factor) override { return centralized_->ScaleResiduals(factor); }
  std::vector<GroupState> SaveState() const override { return centralized_->SaveState(); }
  absl::Status RestoreState(const std::vector<GroupState>& state) override {
    return centralized_->RestoreState(state);
  }

  // The route the next step takes, and how many switches so far.
  Mode mode() const { return mode_; }
  int switches() const { return switches_; }

 private:
  HybridScheme(SchemeInfo scheme, std::unique_ptr<PsScheme> centralized, Collective* collective,
               HybridOptions options, std::vector<uint64_t> selection, std::vector<uint64_t> reselect,
               uint32_t rounds)
      : scheme_(std::move(scheme)),
        centralized_(std::move(centralized)),
        collective_(collective),
        options_(std::move(options)),
        selection_(std::move(selection)),
        reselect_(std::move(reselect)),
        rounds_(rounds) {}
  // sketch_allreduce of `payload`, `group`'s encoded sketch of this step.
  absl::StatusOr<ExchangeResult> ExchangeByCollective(uint64_t step, int group, const Payload& payload,
                                                      size_t dense_bytes);
  void Log(const std::string& line) const;

  // The scheme (auto, fixed_sketch_auto): its algorithm is the fallback's.
  const SchemeInfo scheme_;
  // The centralized route (pushes as sketch_ps or fixed_sketch_ps does),
  // whose compressor stacks, encoded payloads and residuals the fallback
  // reuses.
  std::unique_ptr<PsScheme> centralized_;
  Collective* const collective_;
  const HybridOptions options_;
  const std::vector<uint64_t> selection_;  // each group's k, for the fallback
  const std::vector<uint64_t> reselect_;   // each group's final-round top k (0: all)
  const uint32_t rounds_;                  // per step (2: run.second_round), for the fallback

  // Read and written by Exchange (communication thread) and Reconcile
  // (trainer thread), which never run at once (the pipeline's contract).
  Mode mode_ = Mode::kCentralized;
  int steps_decentralized_ = 0;
  int switches_ = 0;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_SCHEMES_HYBRID_SCHEME_H_
