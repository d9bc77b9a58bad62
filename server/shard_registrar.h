// A shard's registration with a remote coordinator (a shard started with
// --coordinator_address, not serving the coordinator itself).
//
// The registrar registers the shard's address on a thread of its own: first
// until the coordinator takes it, retrying while the coordinator is not up
// yet (UNAVAILABLE, DEADLINE_EXCEEDED) for at most `give_up_after`; then
// again every `refresh_every`, so that a coordinator that restarted (and
// forgot every shard) learns this shard's address again. A first
// registration that fails for good (another error, or still unreachable at
// give_up_after) is reported once through `on_failure`; failures of the
// refreshes are only logged, when the outcome changes (never fatal: the
// coordinator may be restarting).
#ifndef SKETCHFUSE_SERVER_SHARD_REGISTRAR_H_
#define SKETCHFUSE_SERVER_SHARD_REGISTRAR_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "proto/coordinator.pb.h"
#include "proto/rpc_channel.h"

namespace sketchfuse {

struct RegistrarOptions {
  absl::Duration give_up_after = absl::Minutes(1);
  absl::Duration retry_every = absl::Milliseconds(200);
  absl::Duration refresh_every = absl::Seconds(2);
  // Receives one line per change of outcome (default: standard output for
  // successes, standard error for failures).
  std::function<void(const std::string&)> log;
};

class ShardRegistrar {
 public:
  // One RegisterShard call; its status is the coordinator's answer.
  using RegisterOnce = std::function<absl::Status(const v1::RegisterShardRequest&)>;

  // RegisterShard over gRPC to the coordinator at `address`, with the call
  // credentials of `options` and a 5 s deadline per call.
  static RegisterOnce OverGrpc(const std::string& address, const RpcChannelOptions& options);

  // Starts registering `request` as described above. `coordinator` names the
  // coordinator in messages. `on_failure` (may be empty) runs at most once,
  // on the registrar's thread, with an error that names the coordinator; it
  // does not run when the registrar is stopped first.
  ShardRegistrar(RegisterOnce register_once, v1::RegisterShardRequest request, std::string coordinator,
                 RegistrarOptions options, std::function<void(const absl::Status&)> on_failure);
  // Stop().
  ~ShardRegistrar();
  ShardRegistrar(const ShardRegistrar&) = delete;
  ShardRegistrar& operator=(const ShardRegistrar&) = delete;

  // Stops registering and joins the thread: returns once a call in flight
  // (at most its deadline) ends. Idempotent.
  void Stop();

  // Whether the coordinator took the latest call; successful calls so far.
  bool registered() const { return registered_.load(); }
  int64_t registrations() const { return registrations_.load(); }

 private:
  void Run();
  // Registers until the coordinator takes it; an error when it will not.
  absl::Status RegisterFirst();
  void Log(const std::string& line, bool failure) const;

  const RegisterOnce register_once_;
  const v1::RegisterShardRequest request_;
  const std::string coordinator_;
  const RegistrarOptions options_;
  const std::function<void(const absl::Status&)> on_failure_;

  absl::Notification stopping_;
  std::atomic<bool> registered_{false};
  std::atomic<int64_t> registrations_{0};
  std::thread thread_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_SERVER_SHARD_REGISTRAR_H_
