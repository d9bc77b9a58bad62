// The coordinator of one job, as plain C++ (no gRPC types; the service in
// server/coordinator_service.h adapts it).
//
// It assembles the job: workers join with their run configuration, shards
// register their addresses, and once all world_size workers and all shards
// are there every joined worker is answered with its rank, the job's groups
// (the fusion plan), the shard map and the hash seed. Ranks follow the
// workers' ids in natural order ("worker-2" before "worker-10") and never
// change: a worker that restarts and joins again gets its rank back.
//
// It also keeps a small key-value store with blocking reads (rendezvous of
// the collectives, the divergence notice) and tracks liveness by heartbeats.
//
// What a worker's credentials allow, with the servers' shard token set
// (proofs on, server/worker_proof.h):
//   - Join: with require_join_credentials, an id joins only with the join
//     credential its operator issued for it, so nobody joins under another
//     worker's id, before the job is complete or after; a re-join of an id
//     that has its rank also needs that rank's proof.
//   - The store (common/rank_keys.h): a key ending in "/rank/<r>" (each
//     rank's rendezvous address, rank 0's NCCL id) belongs to rank r, which
//     may write it again (a restarted rank's new address); every other key
//     is written once (a Set that would change its value is refused
//     ALREADY_EXISTS; the same value again is a no-op). With proofs on, only
//     a worker holding a rank's proof writes, and a rank's key only that
//     rank: no worker can rewire another's rendezvous or replace a key. Any
//     ranked worker may still post a key of its own, such as the divergence
//     notice that stops the run (as it could by diverging).
//
// Thread-safe. Blocking calls wait until their deadline or until `cancelled`
// returns true (polled), whichever comes first.
#ifndef SKETCHFUSE_SERVER_COORDINATOR_CORE_H_
#define SKETCHFUSE_SERVER_COORDINATOR_CORE_H_

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/coordinator.pb.h"
#include "proto/job_config.pb.h"
#include "server/worker_proof.h"

namespace sketchfuse {

struct CoordinatorOptions {
  int num_shards = 1;
  // A joined worker not heard from (join or heartbeat) for this long is dead;
  // before the job is complete, its place may go to another worker (Join).
  absl::Duration liveness_timeout = absl::Seconds(15);
  // The workers' proofs (server/worker_proof.h; off by default): Join hands
  // each worker its rank's, and a heartbeat, a Set, or a re-join of an id
  // that has its rank must carry it.
  WorkerProofs proofs;
  // Every Join must carry its id's join credential (needs proofs on).
  bool require_join_credentials = false;
  // Key-value store bounds.
  size_t max_key_bytes = 256;
  size_t max_value_bytes = 1 << 20;
  size_t max_keys = 4096;
  // Calls waiting at once (Get for a key; Join for the job to assemble, which
  // may also wait world_size more): each holds a server thread, so past this
  // many a call that would wait is refused with RESOURCE_EXHAUSTED.
  size_t max_waiting_calls = 128;
  // The longest a Get waits, whatever its wait_ms asks; the NOT_FOUND answer
  // states how long it waited.
  absl::Duration max_get_wait = absl::Seconds(60);
};

// OK for a worker id of 1 to 128 letters, digits, '-', '_' and '.';
// INVALID_ARGUMENT naming the problem otherwise.
absl::Status CheckWorkerId(const std::string& id);

// Natural order of worker ids: equal non-digit prefixes compare by the value
// of their trailing number ("w-2" < "w-10"); otherwise lexicographic.
bool NaturalLess(const std::string& a, const std::string& b);

class CoordinatorCore {
 public:
  using Cancelled = std::function<bool()>;

  // INVALID_ARGUMENT if the job has no run, no groups, a world size of 0,
  // groups whose layer ranges do not tile run.layer_sizes, or num_shards < 1.
  static absl::StatusOr<std::unique_ptr<CoordinatorCore>> Create(v1::JobConfig job,
                                                                 CoordinatorOptions options);

  // Joins `request.worker_id` and waits for the rest of the job.
  //   INVALID_ARGUMENT: another job, a bad worker id, a fingerprint that does
  //     not match the run sent with it;
  //   FAILED_PRECONDITION: a worker build with another sketch hash family
  //     (CheckSketchHashFamily), a run that differs from the job's (the
  //     message lists each differing field; a run without
  //     partition_elements takes the job's), or the job already has all its
  //     workers;
  //   DEADLINE_EXCEEDED / CANCELLED: the job was not complete in time (the
  //     message says who is still missing). The worker stays joined, as long
  //     as it is heard from: until the job is complete, a joined worker
  //     neither waiting in a Join nor heard from for liveness_timeout is
  //     forgotten at the next Join, so the job assembles from the workers
  //     still there (a mistyped id or a worker that exited holds no place);
  //   RESOURCE_EXHAUSTED: world_size + max_waiting_calls calls wait already;
  //   PERMISSION_DENIED: with require_join_credentials, a Join whose
  //     `join_credential` (the call's) is not its id's; with proofs on, a
  //     re-join of an id that has its rank without that rank's proof
  //     (`proof`, the call's).
  // The reply carries the rank's proof (empty with proofs off).
  absl::StatusOr<v1::JoinReply> Join(const v1::JoinRequest& request, absl::Time deadline,
                                     const Cancelled& cancelled, absl::string_view proof = "",
                                     absl::string_view join_credential = "");

  // Records the address of a shard. A shard that restarts registers again and
  // replaces its address. INVALID_ARGUMENT for another job, an index out of
  // range or an empty address; FAILED_PRECONDITION for a shard build with
  // another sketch hash family, a shard count other than the coordinator's,
  // or a shard whose job config is not the coordinator's or is not stated
  // (job_fingerprint empty or other than JobFingerprint: other groups or
  // partitions; the message names both partitionings).
  absl::Status RegisterShard(const v1::RegisterShardRequest& request);

  // Marks the worker alive at `now` and reports the dead ones. NOT_FOUND for
  // a worker that has not joined; PERMISSION_DENIED, with proofs on, for a
  // worker with a rank whose heartbeat (`proof`, the call's) does not carry
  // that rank's proof (nobody else can keep it alive).
  absl::StatusOr<v1::HeartbeatReply> Heartbeat(const v1::HeartbeatRequest& request,
                                               absl::Time now, absl::string_view proof = "");

  // Sets a key (file comment). INVALID_ARGUMENT for an empty or
  // over-long key or an over-long value; PERMISSION_DENIED, with proofs on,
  // for a call whose `proof` is no rank's of the job, or a key
  // "<...>/rank/<r>" written by another rank; ALREADY_EXISTS for a key of
  // no rank set to another value; RESOURCE_EXHAUSTED when the store is full.
  absl::Status Set(const v1::KeyValue& entry, absl::string_view proof = "");

  // The value of a key, waiting up to request.wait_ms, max_get_wait and
  // `deadline`, whichever comes first, for it to be set: NOT_FOUND if it was
  // not, naming the key and how long it waited; RESOURCE_EXHAUSTED if it
  // would wait while max_waiting_calls calls wait already.
  absl::StatusOr<v1::KeyValue> Get(const v1::GetRequest& request, absl::Time deadline,
                                   const Cancelled& cancelled);

  const v1::JobConfig& job() const { return job_; }
  std::string fingerprint() const { return fingerprint_; }

 private:
  CoordinatorCore(v1::JobConfig job, CoordinatorOptions options, std::vector<uint32_t> shard_of_group);

  absl::Status CheckJob(const std::string& job) const;
  bool CompleteLocked() const;
  // Fixes the ranks (natural order of ids) the first time the job is complete.
  void AssignRanksIfCompleteLocked();
  // Before the job is complete: forgets the joined workers that wait in no
  // Join and were not heard from for liveness_timeout by `now`.
  void ForgetSilentJoinersLocked(absl::Time now);
  // Who has not arrived yet, for error messages.
  std::string MissingLocked() const;
  // Waits on `changed_` until `done()` or the deadline or cancellation.
  // Returns done(); RESOURCE_EXHAUSTED, without waiting, when it would wait
  // and `max_waiting` calls wait already.
  absl::StatusOr<bool> WaitLocked(std::unique_lock<std::mutex>& lock, absl::Time deadline, size_t max_waiting,
                                  const Cancelled& cancelled, const std::function<bool()>& done);

  const v1::JobConfig job_;
  const CoordinatorOptions options_;
  const std::vector<uint32_t> shard_of_group_;
  const std::string fingerprint_;
  const std::string job_fingerprint_;  // JobFingerprint(job_), which shards state
  // With proofs on, each rank's proof -> the rank (who writes the store).
  std::map<std::string, uint32_t> rank_of_proof_;

  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, absl::Time> last_seen_;  // joined workers
  std::map<std::string, int> joining_;           // Join calls waiting, by worker id
  std::map<std::string, uint32_t> ranks_;        // assigned once the job is complete
  std::vector<std::string> shard_addresses_;     // "" until registered
  std::map<std::string, std::string> store_;
  size_t waiting_ = 0;  // calls in WaitLocked
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_SERVER_COORDINATOR_CORE_H_
