// The worker's side of the centralized route: one gRPC channel per
// aggregation shard, pushes of a group's payload to the shard that owns it,
// and the update the shard answers with.
//
// Pushes are asynchronous (gRPC callback API), so pushes of different groups
// are in flight to all shards at once. A push is re-pushed after an
// exponential backoff, until its retry budget is spent, when it fails with
//   - UNAVAILABLE (shard down or restarting, connection reset), or
//   - DEADLINE_EXCEEDED from the shard (its round deadline passed before
//     every worker pushed: a straggler or a worker restarting; the shard
//     freed the round, and the re-push starts it afresh for the late ones),
//   - RESOURCE_EXHAUSTED (the shard holds its maximum of open rounds or
//     payload bytes; the rounds in flight free them as they complete).
// Re-pushing is safe because the servers are idempotent per (round, worker).
// Every other failure (INVALID_ARGUMENT, the push's own deadline, ...) is
// reported at once.
#ifndef SKETCHFUSE_WORKER_RPC_PS_TRANSPORT_H_
#define SKETCHFUSE_WORKER_RPC_PS_TRANSPORT_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/payload.h"
#include "grpcpp/generic/generic_stub.h"
#include "proto/rpc_channel.h"
#include "worker/rpc/transport_faults.h"

namespace sketchfuse {

struct RetryPolicy {
  // Deadline of one push (it waits for the whole round).
  absl::Duration push_deadline = absl::Seconds(60);
  // Attempts in all, the first included (re-pushes after UNAVAILABLE and
  // after the shard's round deadline share the budget).
  int max_attempts = 5;
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(2);
  // Faults to inject into the pushes (tests of retries and idempotency;
  // none by default). An injected failure is retried like a real one.
  TransportFaults inject;
};

struct PushOutcome {
  Update update;
  // Workers whose payloads the update sums.
  uint32_t contributors = 0;
  int attempts = 0;
  // Payload bytes sent by the successful attempt (as serialized).
  size_t bytes_sent = 0;
};

using PushDone = std::function<void(absl::StatusOr<PushOutcome>)>;

class PsTransport {
 public:
  // `shard_addresses[s]` is shard s's host:port.
  PsTransport(const std::vector<std::string>& shard_addresses, RpcChannelOptions options,
              RetryPolicy policy);
  ~PsTransport();  // waits for pushes in flight

  // Pushes `payload` as `worker`'s part of round (job, step, group) to
  // `shard`; `done` runs exactly once, on a gRPC thread, with the decoded
  // update or the final error (which names the shard and the group). The
  // payload's values are sent from where they lie (proto/push_codec.h), so
  // it must not change until `done` has run; the transport holds a
  // reference to it until then.
  void Push(int shard, const std::string& job, uint64_t step, uint32_t group, uint32_t worker,
            std::shared_ptr<const Payload> payload, PushDone done);
  // The same for the round's second round: `payload` is sparse, `worker`'s
  // exact values at the candidates the first round answered with; the update
  // holds their sums over the workers.
  void PushSecondRound(int shard, const std::string& job, uint64_t step, uint32_t group, uint32_t worker,
                       std::shared_ptr<const Payload> payload, PushDone done);

  int num_shards() const { return static_cast<int>(stubs_.size()); }

  // OK if every shard answers gRPC's health check with SERVING within
  // `timeout` (over fresh connections, so a shard that restarted is seen at
  // once); otherwise UNAVAILABLE naming the first shard that does not.
  absl::Status ProbeShards(absl::Duration timeout) const;

  // Faults injected so far (RetryPolicy::inject) and attempts retried after
  // UNAVAILABLE, injected or real.
  uint64_t injected_faults() const { return injected_.load(); }
  uint64_t retries() const { return retries_.load(); }

  // Replaces the connections to the shards by fresh ones (after the shards
  // restarted; the old channels may still be backing off). Must not be
  // called while pushes are in flight.
  void Reconnect();

 private:
  struct Call;
  void Send(int shard, const std::string& job, uint64_t step, uint32_t group, bool second_round, uint32_t worker,
            std::shared_ptr<const Payload> payload, PushDone done);
  void Attempt(std::shared_ptr<Call> call);
  void Send(std::shared_ptr<Call> call, bool drop_reply);
  // Ends an attempt: retries after UNAVAILABLE within the budget, else
  // completes the push.
  void Finish(std::shared_ptr<Call> call, const grpc::Status& status);

  const RpcChannelOptions options_;
  const RetryPolicy policy_;
  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs_;  // raw bytes: push_codec

  FaultDice dice_;
  std::atomic<uint64_t> injected_{0}, retries_{0};

  std::mutex mu_;
  std::condition_variable idle_;
  int in_flight_ = 0;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_RPC_PS_TRANSPORT_H_
