// The one interface a method's rounds are written against: something that
// sums (or, for sparse payloads, gathers and sums) one round of a group's
// payloads over the job's workers and finishes the round where the sum is,
// by the one rule of common/round_finish.h. Two implementations:
//   ShardReducer       (shard_reducer.h)      pushes to the aggregation shard
//                                             that owns the group, which sums
//                                             and finishes the round;
//   CollectiveReducer  (collective_reducer.h) allreduces among the workers
//                                             (Gloo, NCCL, the in-process or
//                                             the hook's collective), and
//                                             every worker finishes the round.
// A method bound to either finishes its rounds by the same code; the sums
// differ only in the order of their float additions (worker order on the
// shard, the collective's own order on a ring), so on sums that are exact in
// float the answers are the same to the bit (exchange_rounds_test).
#ifndef SKETCHFUSE_WORKER_ROUNDS_ROUND_REDUCER_H_
#define SKETCHFUSE_WORKER_ROUNDS_ROUND_REDUCER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/payload.h"
#include "worker/core/trace_span.h"

namespace sketchfuse {

// Round `round` of group `group` (the job's group index) at `step`.
struct GroupRound {
  uint64_t step = 0;
  int group = 0;
  uint32_t round = 0;
};

struct RoundAnswer {
  // The finished round (FinishRound): round 0's decoded update, or a
  // candidate list where another round follows; a later round's exact sums.
  // The same on every worker of the job.
  Update update;
  // This worker's bytes for the round, as its transport or collective moved
  // them.
  size_t bytes_sent = 0;
  size_t bytes_received = 0;
  // Where the round's time went, in order.
  std::vector<TraceSpan> spans;
};

using RoundDone = std::function<void(absl::StatusOr<RoundAnswer>)>;

class RoundReducer {
 public:
  virtual ~RoundReducer() = default;

  // Adds this worker's `payload` to `round` and completes `done` exactly
  // once, with the round's answer or an error (the transport's or the
  // collective's; INVALID_ARGUMENT for a payload that does not fit). Round 0
  // takes the group's encoded payload; round r > 0 candidate values: this
  // worker's values at round r - 1's candidates, in their order, without
  // indices. Every worker reduces the same rounds of a group in the same
  // order. The reducer holds `payload` until `done` has run.
  virtual void Reduce(const GroupRound& round, std::shared_ptr<const Payload> payload, RoundDone done) = 0;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_ROUNDS_ROUND_REDUCER_H_
