// Faults the PS transport can inject into its own pushes, to test retries and
// the servers' idempotency with real processes (sketchfuse_worker
// --inject_faults). Each attempt of a push draws at most one fault:
//
//   fail_before_send=P   the attempt fails with UNAVAILABLE before anything
//                        is sent (a connection refused);
//   drop_reply=P         the push reaches the server and is handled, and its
//                        reply is lost (UNAVAILABLE): the re-push must not be
//                        added twice and gets the kept answer;
//   delay=P:D            the attempt is sent after D (a slow link), e.g.
//                        delay=0.1:20ms;
//   seed=N               seeds the draws (default 1).
//
// Spec: comma-separated key=value pairs, e.g.
// "fail_before_send=0.05,drop_reply=0.05,delay=0.05:20ms". Empty: none.
#ifndef SKETCHFUSE_WORKER_RPC_TRANSPORT_FAULTS_H_
#define SKETCHFUSE_WORKER_RPC_TRANSPORT_FAULTS_H_

#include <cstdint>
#include <mutex>
#include <random>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace sketchfuse {

struct TransportFaults {
  double fail_before_send = 0;
  double drop_reply = 0;
  double delay = 0;
  absl::Duration delay_time;
  uint64_t seed = 1;

  bool any() const { return fail_before_send > 0 || drop_reply > 0 || delay > 0; }
};

// INVALID_ARGUMENT naming the part at fault: an unknown key, a probability
// outside [0, 1], probabilities that add up to more than 1, a bad duration.
absl::StatusOr<TransportFaults> ParseTransportFaults(absl::string_view spec);

// Draws the fault of each attempt; thread-safe.
class FaultDice {
 public:
  enum class Fault { kNone, kFailBeforeSend, kDropReply, kDelay };

  explicit FaultDice(const TransportFaults& faults) : faults_(faults), rng_(faults.seed) {}

  Fault Draw();
  const TransportFaults& faults() const { return faults_; }

 private:
  const TransportFaults faults_;
  std::mutex mu_;
  std::mt19937_64 rng_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_RPC_TRANSPORT_FAULTS_H_
