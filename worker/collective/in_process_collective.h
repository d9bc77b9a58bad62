// A collective group whose ranks are threads of one process (the virtual
// workers of worker/virtual/virtual_workers.h): no sockets, but the results
// and the byte counts of the Gloo backend, so a job of W virtual workers
// computes and reports what W processes on Gloo would.
//
// Contract (beyond collective.h's):
//  - AllReduceSum adds the ranks' values in the order Gloo's ring allreduce
//    adds them (RingSumOrder), so its sums are bit-identical to Gloo's for
//    the same inputs and group size, not merely close.
//  - Every operation counts bytes_sent() and bytes_received() with the same
//    formulas as GlooCollective (collective.h's helpers; Send and Recv count
//    an 8-byte length and the body), as if the data had crossed the wire.
//  - An operation waits for the other ranks at most the group's timeout
//    (DEADLINE_EXCEEDED naming the operation), or until Abort (its status).
//  - Send does not wait for the Recv (a mailbox per (sender, receiver, tag)).
//
// NOTE: one thread at a time per rank (collective.h); the ranks of a group
// run on threads of their own.
#ifndef SKETCHFUSE_WORKER_COLLECTIVE_IN_PROCESS_COLLECTIVE_H_
#define SKETCHFUSE_WORKER_COLLECTIVE_IN_PROCESS_COLLECTIVE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/collective/collective.h"

namespace sketchfuse {

// The chunk c of element `element` in a Gloo ring allreduce of `elements`
// floats over `size` ranks (Gloo's segments of at most 1 MiB, at least two
// per rank; chunk c is rank c's run of segments). Its sum starts with rank
// c - 1's value, adds c - 2's, c - 3's, ... and ends with rank c's: the
// order AllReduceSum adds in. Exposed for tests.
int RingChunkOf(uint64_t element, uint64_t elements, int size);

class InProcessGroup {
 public:
  InProcessGroup(int size, absl::Duration timeout);
  ~InProcessGroup();

  int size() const { return size_; }
  // Rank `rank`'s view of the group (not owned by the group; the group must
  // outlive it).
  std::unique_ptr<Collective> Rank(int rank);
  // Fails every operation waiting now or later with `why` (not OK): a rank
  // that stopped will never arrive. An operation that times out aborts the
  // group the same way (a rank that gave up no longer holds its input).
  void Abort(const absl::Status& why);

 private:
  friend class InProcessCollective;
  // One collective operation, met by every rank (operations are numbered per
  // rank in call order, and every rank calls them in the same order).
  struct Meeting {
    std::string op;
    int arrived = 0, left = 0;
    bool done = false;
    // Valid only until the meeting is done: a rank returns, and its input
    // may die, as soon as it has its result.
    std::vector<const void*> inputs;   // by rank
    std::vector<size_t> counts;        // elements, by rank
    // The result, owned by the meeting: AllReduceSum's sum; AllGatherV's
    // blocks in rank order, Broadcast's root data (4-byte elements).
    std::vector<float> sum;
    std::vector<uint32_t> words;
  };
  // Waits at `meeting`'s operation number `seq` for every rank, with this
  // rank's input; the last to arrive runs `complete`. The meeting is valid
  // until Leave.
  absl::StatusOr<Meeting*> Meet(uint64_t seq, const std::string& op, int rank, const void* input, size_t count,
                                const std::function<void(Meeting&)>& complete);
  void Leave(uint64_t seq);
  void Post(int from, int to, uint32_t tag, std::string message);
  absl::StatusOr<std::string> Take(int from, int to, uint32_t tag);

  const int size_;
  const absl::Duration timeout_;
  std::mutex mu_;
  std::condition_variable changed_;
  absl::Status aborted_;
  std::map<uint64_t, Meeting> meetings_;
  std::map<std::tuple<int, int, uint32_t>, std::deque<std::string>> mailboxes_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_COLLECTIVE_IN_PROCESS_COLLECTIVE_H_
