// The worker's side of the centralized route: pushes of a group's payload to
// the aggregation shard that owns it, and the update the shard answers with.
// PsScheme and the hybrid depend on this interface only; the transport of a
// real job is GrpcPsTransport (worker/rpc/grpc_ps_transport.h), and tests of
// the schemes' failover run them on a loopback of in-process cores
// (worker/virtual/loopback_shards.h).
//
// Contract of every implementation: each push's `done` runs exactly once
// (on a thread of the transport, or before Push returns when the push fails
// at once), with the update or with the final error, which names the shard and the group; UNAVAILABLE
// means the shard could not be reached or was down within the transport's
// retry budget (the hybrid falls back on it). The destructor waits for the
// pushes in flight.
#ifndef SKETCHFUSE_WORKER_RPC_PS_TRANSPORT_H_
#define SKETCHFUSE_WORKER_RPC_PS_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/payload.h"

namespace sketchfuse {

struct PushOutcome {
  Update update;
  // Workers whose payloads the update sums.
  uint32_t contributors = 0;
  int attempts = 0;
  // Bytes of the successful attempt, as serialized: the request sent and the
  // reply received.
  size_t bytes_sent = 0;
  size_t bytes_received = 0;
};

using PushDone = std::function<void(absl::StatusOr<PushOutcome>)>;

// One push: `worker`'s part of round `round` (numbered from 0) of (job,
// step, group), at `shard`.
struct PushTarget {
  int shard = 0;
  std::string job;
  uint64_t step = 0;
  uint32_t group = 0;
  uint32_t round = 0;
  uint32_t worker = 0;
};

class PsTransport {
 public:
  virtual ~PsTransport() = default;

  // Pushes `payload` as the target's part of its round; `done` runs exactly
  // once with the shard's answer or the final error. In round 0 the payload
  // is the group's encoded payload and the answer its decoded update (a
  // candidate list where the group takes another round); in round 1 it is
  // candidate values, the worker's exact values at the candidates round 0
  // answered with, in their order, and the answer holds their sums over the
  // workers there (the k largest where the job re-selects). The payload's
  // values may be sent from where they lie, so it must not change until
  // `done` has run; the transport holds a reference to it until then.
  void Push(PushTarget target, std::shared_ptr<const Payload> payload, PushDone done) {
    Send(std::move(target), std::move(payload), std::move(done));
  }

  virtual int num_shards() const = 0;

  // OK if every shard answers that it is serving within `timeout`, over
  // fresh connections (a shard that restarted is seen at once); otherwise
  // UNAVAILABLE naming the first shard that does not.
  virtual absl::Status ProbeShards(absl::Duration timeout) const = 0;

  // Replaces the connections to the shards by fresh ones (after the shards
  // restarted). Must not be called while pushes are in flight.
  virtual void Reconnect() = 0;

  // Faults injected so far, and attempts retried, injected or real.
  virtual uint64_t injected_faults() const = 0;
  virtual uint64_t retries() const = 0;

 protected:
  // One push, as Push describes. A target shard out of
  // range completes with INVALID_ARGUMENT.
  virtual void Send(PushTarget target, std::shared_ptr<const Payload> payload, PushDone done) = 0;
};

// Makes the transport to a joined job's shards (`shard_addresses[s]` is shard
// s's host:port).
using TransportFactory =
    std::function<std::unique_ptr<PsTransport>(const std::vector<std::string>& shard_addresses)>;

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_RPC_PS_TRANSPORT_H_
