// A worker's view of the coordinator: join (waiting for the job to
// assemble), the key-value store, and a heartbeat thread.
#ifndef SKETCHFUSE_WORKER_RPC_COORDINATOR_CLIENT_H_
#define SKETCHFUSE_WORKER_RPC_COORDINATOR_CLIENT_H_

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/rpc_channel.h"
#include "worker/collective/key_value_store.h"

namespace sketchfuse {

// The coordinator's key-value store is the collectives' rendezvous store.
class CoordinatorClient final : public KeyValueStore {
 public:
  CoordinatorClient(const std::string& address, std::string job, std::string worker_id,
                    RpcChannelOptions options);
  ~CoordinatorClient() override;  // stops the heartbeat thread

  // `options.worker_proof`, if set, is the proof a former Join of this worker
  // gave (kept across a restart): every call carries it, and a successful
  // Join replaces it with the reply's (worker_proof()).
  //
  // Joins with `run`, retrying while the coordinator is unreachable, and waits
  // up to `patience` for the job to assemble. The coordinator's refusal
  // (a different configuration or sketch hash family, a full job) is
  // returned as is; so is FAILED_PRECONDITION for a coordinator whose reply
  // declares another sketch hash family (CheckSketchHashFamily).
  absl::StatusOr<v1::JoinReply> Join(const v1::RunConfig& run, absl::Duration patience);

  absl::Status Set(const std::string& key, const std::string& value) override;
  // Waits up to `wait` for the key; NOT_FOUND if it is not set by then.
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration wait) override;

  // Sends a heartbeat every `period` on a thread of its own until destroyed.
  // The latest reply's dead workers are readable through dead_workers().
  // A coordinator that answers NOT_FOUND has restarted and forgotten the
  // job: the thread joins it again with the run of the last Join (without
  // waiting for the others), so the restarted coordinator rebuilds the job
  // from the workers that are still alive and gives a worker that restarts
  // later its rank back.
  void StartHeartbeats(absl::Duration period);
  std::vector<std::string> dead_workers() const;
  // The proof of this worker's rank the last Join gave (server/
  // worker_proof.h), or the one it was created with; empty when the servers
  // issue none.
  std::string worker_proof() const;
  // How many times the heartbeat thread joined a restarted coordinator again.
  int rejoins() const;
  // OK, or why the latest rejoin was refused for good: the restarted
  // coordinator refused this worker (another run or sketch hash family), or
  // answered with another sketch hash family. Each new refusal is also
  // written to stderr. A rejoin still waiting for the job is not a refusal.
  absl::Status rejoin_refusal() const;

 private:
  const std::string address_;
  const std::string job_;
  const std::string worker_id_;
  const RpcChannelOptions options_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
  // options_ with the current worker proof, for one call.
  RpcChannelOptions CallOptions() const;

  mutable std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::vector<std::string> dead_workers_;
  v1::JoinRequest joined_;  // the last Join's request, for rejoining
  int rejoins_ = 0;
  std::string worker_proof_;
  absl::Status rejoin_refusal_;
  std::thread heartbeats_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_RPC_COORDINATOR_CLIENT_H_
