// The centralized route's transport over gRPC: one channel per aggregation
// shard, pushes of a group's payload to the shard that owns it
// (worker/rpc/ps_transport.h has the interface and its contract).
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
#ifndef SKETCHFUSE_WORKER_RPC_GRPC_PS_TRANSPORT_H_
#define SKETCHFUSE_WORKER_RPC_GRPC_PS_TRANSPORT_H_

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "grpcpp/generic/generic_stub.h"
#include "proto/rpc_channel.h"
#include "worker/rpc/ps_transport.h"
#include "worker/rpc/transport_faults.h"

namespace sketchfuse {

struct RetryPolicy {
  // Deadline of one push (it waits for the whole round).
  absl::Duration push_deadline = absl::Seconds(60);
  // Attempts in all, the first included (re-pushes after UNAVAILABLE and
  // RESOURCE_EXHAUSTED share the budget, each after a backoff from
  // initial_backoff doubling to max_backoff). Re-pushes that wait for other
  // workers are not counted and go on until push_deadline after the first
  // attempt: after ABORTED (a round that opens when another worker pushes
  // it), and after the shard failed the round at its round deadline (late
  // workers; re-pushed after initial_backoff each time, which should be
  // shorter than the round deadline, so that a late worker's push meets
  // this one).
  int max_attempts = 5;
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(2);
  // Faults to inject into the pushes (tests of retries and idempotency;
  // none by default). An injected failure is retried like a real one.
  TransportFaults inject;
};

class GrpcPsTransport final : public PsTransport {
 public:
  // `shard_addresses[s]` is shard s's host:port.
  GrpcPsTransport(const std::vector<std::string>& shard_addresses, RpcChannelOptions options,
              RetryPolicy policy);
  ~GrpcPsTransport() override;  // waits for pushes in flight and their last references

  int num_shards() const override { return static_cast<int>(stubs_.size()); }

  // OK if every shard answers gRPC's health check with SERVING within
  // `timeout` (over fresh connections, so a shard that restarted is seen at
  // once); otherwise UNAVAILABLE naming the first shard that does not.
  absl::Status ProbeShards(absl::Duration timeout) const override;

  // Faults injected so far (RetryPolicy::inject) and attempts retried after
  // UNAVAILABLE, injected or real.
  uint64_t injected_faults() const override { return injected_.load(); }
  uint64_t retries() const override { return retries_.load(); }

  // Replaces the connections to the shards by fresh ones (after the shards
  // restarted; the old channels may still be backing off). Must not be
  // called while pushes are in flight.
  void Reconnect() override;

 private:
  struct Call;
  void Send(PushTarget target, std::shared_ptr<const Payload> payload, PushDone done) override;
  void Attempt(std::shared_ptr<Call> call);
  void SendAttempt(std::shared_ptr<Call> call, bool drop_reply);
  // Ends an attempt: retries after UNAVAILABLE (or the shard's caps) within
  // the attempts' budget, and after ABORTED (the shard's step window: a
  // round that opens when another worker pushes it) or the shard's round
  // deadline (late workers) until push_deadline after the first attempt;
  // else completes the push.
  void Finish(std::shared_ptr<Call> call, const grpc::Status& status);

  const RpcChannelOptions options_;
  const RetryPolicy policy_;
  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs_;  // raw bytes: push_codec

  FaultDice dice_;
  std::atomic<uint64_t> injected_{0}, retries_{0};

  std::mutex mu_;
  std::condition_variable idle_;
  int live_calls_ = 0;  // Calls not yet destroyed (pushes in flight, and their last references)
};

// Makes GrpcPsTransports with these options and this policy.
TransportFactory GrpcTransports(RpcChannelOptions options, RetryPolicy policy);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_RPC_GRPC_PS_TRANSPORT_H_
