// The centralized reducer: each round is pushed to the aggregation shard
// that owns the group, which sums the job's workers' payloads and finishes
// the round (server/aggregation_core.h, by common/round_finish.h's rule);
// its answer is the round's.
#ifndef SKETCHFUSE_WORKER_ROUNDS_SHARD_REDUCER_H_
#define SKETCHFUSE_WORKER_ROUNDS_SHARD_REDUCER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "worker/rounds/round_reducer.h"
#include "worker/rpc/ps_transport.h"

namespace sketchfuse {

class ShardReducer final : public RoundReducer {
 public:
  // Pushes as `worker` of `job` through `transport` (not owned; it must
  // outlive the reducer); group g of the job is the shards' group
  // `group_ids[g]`, owned by shard `shard_of_group[g]`.
  ShardReducer(PsTransport* transport, std::string job, uint32_t worker, std::vector<uint32_t> group_ids,
               std::vector<int> shard_of_group);

  // INVALID_ARGUMENT for a group outside the job; else the transport's
  // outcome (it retries what can be retried).
  void Reduce(const GroupRound& round, std::shared_ptr<const Payload> payload, RoundDone done) override;

 private:
  PsTransport* const transport_;
  const std::string job_;
  const uint32_t worker_;
  const std::vector<uint32_t> group_ids_;
  const std::vector<int> shard_of_group_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_ROUNDS_SHARD_REDUCER_H_
