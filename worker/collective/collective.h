// One interface for the collectives of the decentralized route, with two
// real backends: Gloo over TCP on CPUs (gloo_collective.h) and NCCL on GPUs
// (nccl_collective.h). The schemes of worker/decentralized_schemes.h are
// written against this interface only.
//
// Contract:
//  - Collective operations (AllReduceSum, AllGatherV, Broadcast, Barrier) are
//    called by every rank, in the same order on every rank; they block until
//    this rank's part is done and return the same result on every rank
//    (AllReduceSum: bit-identical sums everywhere, so every rank decodes the
//    same top-k).
//  - Send/Recv involve two ranks only and are matched by (peer, tag); a
//    message sent with a tag is received by the Recv with the same tag.
//  - Every failure (a peer gone, a timeout, bad arguments) is an absl::Status:
//    UNAVAILABLE or DEADLINE_EXCEEDED for a transport failure,
//    INVALID_ARGUMENT for bad arguments (nothing sent then).
//  - bytes_sent() counts what this rank has put on the wire, as the backend's
//    algorithm sends it (documented per backend); bytes_received() what it
//    took off the wire by the same algorithm (a ring allreduce receives what
//    it sends, an allgather every other rank's block, a broadcast the data
//    once but at the root, a Recv its message).
//
// NOTE: not thread-safe; one thread at a time (the worker's communication
// thread, or the trainer thread once the step's exchanges are over).
#ifndef SKETCHFUSE_WORKER_COLLECTIVE_COLLECTIVE_H_
#define SKETCHFUSE_WORKER_COLLECTIVE_COLLECTIVE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace sketchfuse {

class Collective {
 public:
  virtual ~Collective() = default;

  // "gloo" or "nccl".
  virtual std::string backend() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // data[i] = sum over ranks of data[i]; the same bits on every rank.
  virtual absl::Status AllReduceSum(absl::Span<float> data) = 0;

  // Every rank's `mine`, concatenated in rank order into *all (resized);
  // (*counts)[r] is rank r's element count. Ranks may give different counts.
  virtual absl::Status AllGatherV(absl::Span<const uint32_t> mine, std::vector<uint32_t>* all,
                                  std::vector<size_t>* counts) = 0;
  virtual absl::Status AllGatherV(absl::Span<const float> mine, std::vector<float>* all,
                                  std::vector<size_t>* counts) = 0;

  // Rank `root`'s data is copied into every rank's data (same size on every
  // rank). INVALID_ARGUMENT for a root outside [0, size).
  virtual absl::Status Broadcast(absl::Span<uint32_t> data, int root) = 0;
  virtual absl::Status Broadcast(absl::Span<float> data, int root) = 0;

  // Returns once every rank has entered.
  virtual absl::Status Barrier() = 0;

  // Sends `message` to `peer`; the peer's Recv(this rank, tag) returns it.
  // Send may block until the peer receives (Gloo's and NCCL's rendezvous),
  // so two ranks that both send first deadlock: use SendRecv to exchange.
  // INVALID_ARGUMENT for a peer outside [0, size) or this rank.
  virtual absl::Status Send(absl::string_view message, int peer, uint32_t tag) = 0;
  virtual absl::StatusOr<std::string> Recv(int peer, uint32_t tag) = 0;
  // Sends `message` to `send_to` and receives from `recv_from` at once (an
  // exchange in which both sides send first cannot deadlock).
  virtual absl::StatusOr<std::string> SendRecv(absl::string_view message, int send_to, int recv_from,
                                               uint32_t tag) = 0;

  virtual uint64_t bytes_sent() const = 0;
  virtual uint64_t bytes_received() const = 0;
};

// Bytes one rank sends in a ring allreduce of `elements` 4-byte values:
// a reduce-scatter and an allgather, 2 (P - 1) / P of the data.
uint64_t RingAllReduceBytes(uint64_t elements, int size);
// Bytes `rank` sends in a ring allgather of per-rank counts `counts` (4-byte
// elements): every block but its right neighbour's.
uint64_t RingAllGatherBytes(const std::vector<size_t>& counts, int rank);
// Bytes `rank` sends in a binomial-tree broadcast of `elements` 4-byte values
// from `root`: one copy per child in the tree.
uint64_t TreeBroadcastBytes(uint64_t elements, int rank, int root, int size);

// What `rank` receives in the same operations: a ring allreduce as much as it
// sends (RingAllReduceBytes); an allgather every block but its own; a
// broadcast the data once, but at the root.
uint64_t RingAllGatherReceivedBytes(const std::vector<size_t>& counts, int rank);
uint64_t BroadcastReceivedBytes(uint64_t elements, int rank, int root, int size);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_COLLECTIVE_COLLECTIVE_H_
