// A Collective whose operations are the caller's callbacks (sf_collective_ops
// of the C ABI): the decentralized schemes run unchanged over a process group
// the library does not own, such as PyTorch DDP's (Gloo here, NCCL on GPUs).
//
// Contract: as worker/collective/collective.h. A callback's failure is
// UNAVAILABLE naming the operation (the caller keeps its own error).
// bytes_sent() counts what the ring and tree algorithms of the library's own
// backends send for the same operation (RingAllReduceBytes,
// RingAllGatherBytes, TreeBroadcastBytes; Send: the message), so a hook's
// ratio compares with a worker's; bytes_received() likewise
// (RingAllGatherReceivedBytes, BroadcastReceivedBytes; Recv: the message).
#ifndef SKETCHFUSE_WORKER_HOOK_CALLBACK_COLLECTIVE_H_
#define SKETCHFUSE_WORKER_HOOK_CALLBACK_COLLECTIVE_H_

#include <string>
#include <vector>

#include "worker/collective/collective.h"
#include "worker/hook/sketchfuse_c.h"

// The C ABI's byte buffer (opaque to C callers).
struct sf_bytes {
  std::string data;
};

namespace sketchfuse {

class CallbackCollective final : public Collective {
 public:
  // INVALID_ARGUMENT unless every callback is set, 0 <= rank < size.
  static absl::StatusOr<std::unique_ptr<CallbackCollective>> Create(const sf_collective_ops& ops, int rank,
                                                                    int size, std::string backend = "callback");

  std::string backend() const override { return backend_; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  absl::Status AllReduceSum(absl::Span<float> data) override;
  absl::Status AllGatherV(absl::Span<const uint32_t> mine, std::vector<uint32_t>* all,
                          std::vector<size_t>* counts) override;
  absl::Status AllGatherV(absl::Span<const float> mine, std::vector<float>* all, std::vector<size_t>* counts) override;
  absl::Status Broadcast(absl::Span<uint32_t> data, int root) override;
  absl::Status Broadcast(absl::Span<float> data, int root) override;
  absl::Status Barrier() override;
  absl::Status Send(absl::string_view message, int peer, uint32_t tag) override;
  absl::StatusOr<std::string> Recv(int peer, uint32_t tag) override;
  absl::StatusOr<std::string> SendRecv(absl::string_view message, int send_to, int recv_from, uint32_t tag) override;
  uint64_t bytes_sent() const override { return bytes_sent_; }
  uint64_t bytes_received() const override { return bytes_received_; }

 private:
  CallbackCollective(const sf_collective_ops& ops, int rank, int size, std::string backend)
      : ops_(ops), rank_(rank), size_(size), backend_(std::move(backend)) {}

  // Gathers 4-byte elements; *all and *counts in elements.
  absl::Status AllGatherWords(const void* mine, size_t count, std::string* all, std::vector<size_t>* counts);
  absl::Status BroadcastWords(void* data, size_t count, int root);
  absl::Status CheckPeer(int peer) const;

  const sf_collective_ops ops_;
  const int rank_;
  const int size_;
  const std::string backend_;
  uint64_t bytes_sent_ = 0;
  uint64_t bytes_received_ = 0;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_HOOK_CALLBACK_COLLECTIVE_H_
