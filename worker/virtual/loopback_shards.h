// A job's aggregation shards as in-process AggregationCores (the servers'
// real aggregation: sums, decode, idempotent rounds), reached without
// sockets: each worker's PsTransport hands its pushes straight to the core
// of the shard. Tests of the schemes' failover (the hybrid's fallback and
// return) switch the shards down and up between steps, and lose a worker's
// replies, deterministically; the gRPC transport's own retries are tested
// against a real server (tests/grpc_ps_transport_test.cc).
//
// A loopback transport makes one attempt per push (it never retries), and
// counts a push's bytes as the gRPC transport would send them
// (proto/push_codec.h). Each core's overdue rounds fail with
// DEADLINE_EXCEEDED after the job's round deadline, as a server's are
// (RoundReaper, every 50 ms).
#ifndef SKETCHFUSE_WORKER_VIRTUAL_LOOPBACK_SHARDS_H_
#define SKETCHFUSE_WORKER_VIRTUAL_LOOPBACK_SHARDS_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/coordinator.pb.h"
#include "proto/job_config.pb.h"
#include "server/aggregation_core.h"
#include "server/aggregator_service.h"
#include "worker/rpc/ps_transport.h"

namespace sketchfuse {

// The reply a coordinator would give `rank` of `job` served by `num_shards`
// in-process shards (addresses "in-process:<shard>", none for 0): the job,
// the shards, its map of groups to shards (ShardOfGroups) and the run's
// fingerprint.
absl::StatusOr<v1::JoinReply> LoopbackJoinReply(const v1::JobConfig& job, uint32_t rank, int num_shards);

class LoopbackShards {
 public:
  // The job's `num_shards` shards (server/job_config.h ShardConfig), up.
  static absl::StatusOr<std::unique_ptr<LoopbackShards>> Create(const v1::JobConfig& job, int num_shards);

  // Makes a worker's transport to these shards (they must outlive it).
  TransportFactory Transports();

  // Down: every push and every probe answers UNAVAILABLE, and the rounds
  // open now fail with UNAVAILABLE (a crash). Up again: fresh cores, as
  // shards restarted without state would be.
  void SetDown(bool down);
  // Down, failing the rounds open now with `why` (the virtual workers are
  // stopping: an exchange that waits on workers that stopped mid-step ends
  // at once, not at the round deadline). Nothing if already down.
  void GoDown(const absl::Status& why);
  // While set, `worker`'s pushes reach the shards (their rounds complete for
  // the others) but their replies are lost: the worker gets UNAVAILABLE.
  void LoseRepliesTo(uint32_t worker, bool lose);

 private:
  class Transport;
  LoopbackShards(v1::JobConfig job, int num_shards) : job_(std::move(job)), num_shards_(num_shards) {}
  absl::Status StartCoresLocked();

  const v1::JobConfig job_;
  const int num_shards_;
  mutable std::mutex mu_;
  // Held shared by a push from its check of down_ until its core has it,
  // and exclusively by GoDown (so a round opened by a late push cannot
  // outlive the shards going down). Taken before mu_.
  std::shared_mutex push_gate_;
  // Shared with pushes in flight, which finish on the cores they started on.
  std::vector<std::shared_ptr<AggregationCore>> cores_;
  // One per core of cores_, declared after them: stopped first.
  std::vector<std::unique_ptr<RoundReaper>> reapers_;
  bool down_ = false;
  std::set<uint32_t> replies_lost_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_VIRTUAL_LOOPBACK_SHARDS_H_
