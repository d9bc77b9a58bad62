// The interface every aggregation scheme implements, centralized (sketch_ps,
// topk_ps, dense_ps) or decentralized (later): it turns each worker's fused
// gradient of a group into the update that every worker applies.
//
// Contract: for a step, Exchange is called once per group (from one thread,
// the worker's communication thread), in the order the groups become ready.
// `done` runs exactly once, on any thread, with the update holding the SUM
// over the job's workers (the caller divides by the world size), or with an
// error. After the caller has applied a step's updates it calls OnApplied
// for each group, so error feedback keeps what was not applied.
#ifndef SKETCHFUSE_WORKER_AGGREGATION_SCHEME_H_
#define SKETCHFUSE_WORKER_AGGREGATION_SCHEME_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/payload.h"

namespace sketchfuse {

struct ExchangeResult {
  Update update;
  // Bytes this worker sent for the group (payload as serialized on the wire).
  size_t bytes_sent = 0;
  // Bytes of the group's dense gradient (4 per element), for the ratio.
  size_t dense_bytes = 0;
};

using ExchangeDone = std::function<void(absl::StatusOr<ExchangeResult>)>;

class AggregationScheme {
 public:
  virtual ~AggregationScheme() = default;

  virtual std::string name() const = 0;

  // Starts the exchange of `group`'s gradient for `step`. `grad` is only read
  // before Exchange returns.
  virtual void Exchange(uint64_t step, int group, absl::Span<const float> grad, ExchangeDone done) = 0;

  // The step's update for `group` was applied.
  virtual absl::Status OnApplied(int group, const Update& update) = 0;

  // The per-group state a restarted worker needs (error-feedback residuals;
  // an empty vector for a group without state), and its restoration.
  // RestoreState: INVALID_ARGUMENT if the state does not fit the groups.
  virtual std::vector<std::vector<float>> SaveState() const = 0;
  virtual absl::Status RestoreState(const std::vector<std::vector<float>>& state) = 0;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_AGGREGATION_SCHEME_H_
