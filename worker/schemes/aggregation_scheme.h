// The interface every aggregation scheme implements, centralized (sketch_ps,
// topk_ps, dense_ps), decentralized (dense_allreduce, sketch_allreduce,
// topk_allgather, gtopk, importance_allreduce, spardl) or both (auto): it
// turns each worker's fused gradient of a group into the update that every
// worker applies.
//
// Contract, per step:
//  1. Exchange is called once per group, from one thread (the worker's
//     communication thread), in group order (the order of the plan, the same
//     on every worker; collectives depend on it). `done` runs exactly once,
//     on any thread, with the update holding the SUM over the job's workers
//     (the caller divides by the world size), or with an error.
//  2. Once every group's `done` has run, Reconcile is called once (from the
//     trainer's thread) with every group's result; a scheme may repair failed
//     groups there (the hybrid redoes them on the decentralized route).
//  3. After the caller has applied the step's updates it calls OnApplied for
//     each group, so error feedback keeps what was not applied. Residual state
//     changes only there: a step that is not applied loses nothing.
//  4. Between steps (after OnApplied, before the next Exchange), a run that
//     keeps its residuals in units of the learning rate calls ScaleResiduals
//     when the rate changes.
#ifndef SKETCHFUSE_WORKER_SCHEMES_AGGREGATION_SCHEME_H_
#define SKETCHFUSE_WORKER_SCHEMES_AGGREGATION_SCHEME_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/payload.h"
#include "worker/compression/group_compressors.h"
#include "worker/core/gradient_view.h"
#include "worker/core/trace_span.h"
#include "worker/schemes/route.h"

namespace sketchfuse {

struct ExchangeResult {
  Update update;
  // Bytes this worker sent and received for the group (as serialized on the
  // wire, or as the collective's algorithm moves them).
  size_t bytes_sent = 0;
  size_t bytes_received = 0;
  // Bytes of the group's dense gradient (4 per element), for the ratio.
  size_t dense_bytes = 0;
  // The route that produced the update (kCentralized or kDecentralized).
  Route route = Route::kCentralized;
  // Where the exchange's time went, in order.
  std::vector<TraceSpan> spans;
};

using ExchangeDone = std::function<void(absl::StatusOr<ExchangeResult>)>;

class AggregationScheme {
 public:
  virtual ~AggregationScheme() = default;

  virtual std::string name() const = 0;

  // True when Exchange needs the group's parameter values (importance-weighted
  // selection); the caller then passes them, else an empty span.
  virtual bool needs_parameters() const { return false; }

  // Starts the exchange of `group`'s gradient for `step`. `grad` (host or,
  // on a GPU worker, device memory) and `params` are only read before
  // Exchange returns.
  virtual void Exchange(uint64_t step, int group, GradientView grad, absl::Span<const float> params,
                        ExchangeDone done) = 0;

  // Every group's result of `step`, in group order; the scheme may replace
  // failed results. An error here fails the step.
  virtual absl::Status Reconcile(uint64_t step, std::vector<absl::StatusOr<ExchangeResult>>& results) {
    return absl::OkStatus();
  }

  // The step's update for `group` was applied.
  virtual absl::Status OnApplied(int group, const Update& update) = 0;

  // Multiplies this worker's error-feedback residuals by `factor` (the rate
  // went from r to r': factor r / r'; v1::RunConfig residual_in_rate_units).
  // Schemes that keep no residual on the worker have nothing to scale.
  // INVALID_ARGUMENT for a factor that is not finite and > 0.
  virtual absl::Status ScaleResiduals(float factor) { return ValidateResidualRescale(factor); }

  // What the decodes gave back of what this worker inserted into peeled
  // sketches so far (GroupCompressors::PeelRecovery); nothing inserted for
  // schemes without them.
  virtual GroupCompressors::PeelRecovery peel_recovery() const { return {}; }

  // The per-group state a restarted worker needs (worker/compression/
  // group_state.h: residual, velocity, the method's own state), one entry
  // per group, and its restoration: INVALID_ARGUMENT, with nothing
  // restored, if the state does not fit.
  virtual std::vector<GroupState> SaveState() const = 0;
  virtual absl::Status RestoreState(const std::vector<GroupState>& state) = 0;
};

// The share of the inserted energy the scheme's decodes gave back so far,
// or -1 when it inserted nothing into peeled sketches.
inline double PeelRecoveredShare(const AggregationScheme& scheme) {
  const GroupCompressors::PeelRecovery recovery = scheme.peel_recovery();
  return recovery.settlements > 0 && recovery.inserted > 0 ? recovery.share() : -1;
}

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_SCHEMES_AGGREGATION_SCHEME_H_
