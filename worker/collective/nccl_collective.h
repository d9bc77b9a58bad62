// The GPU backend of Collective: NCCL (the CUDA toolkit's, or PyTorch's on
// the GPU machine). Rank 0 makes the NCCL unique id and publishes it through
// the KeyValueStore ("<prefix>/unique_id"); every rank joins with it.
//
// The schemes hand host buffers; this backend stages them through device
// buffers (reused, grown on demand) on its own stream, and waits for each
// operation with a bounded wait (cuda/nccl_communicator.h: Synchronize), so a
// lost peer fails the call with DEADLINE_EXCEEDED instead of hanging.
// AllGatherV is an allgather of the counts, then of blocks padded to the
// largest count. Send/Recv carry a (length, tag) header; NCCL matches
// messages by order, so a Recv whose header has another tag fails with
// FAILED_PRECONDITION.
//
// bytes_sent(), as NCCL's ring algorithms send: allreduce 2 (P - 1) / P of
// the data, allgather (P - 1) padded blocks, broadcast the data once per rank
// but the ring's last, point to point the 16-byte header plus the message;
// bytes_received() the same amounts taken in (a broadcast: once, but at the
// root).
//
// Built only where NCCL is (absent from CPU-only builds).
#ifndef SKETCHFUSE_WORKER_COLLECTIVE_NCCL_COLLECTIVE_H_
#define SKETCHFUSE_WORKER_COLLECTIVE_NCCL_COLLECTIVE_H_

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cuda/device_buffer.h"
#include "cuda/nccl_communicator.h"
#include "worker/collective/collective.h"
#include "worker/collective/key_value_store.h"

namespace sketchfuse {

struct NcclOptions {
  // CUDA device of this rank.
  int device = 0;
  // Limit of the rendezvous and of every operation.
  absl::Duration timeout = absl::Seconds(60);
  std::string prefix = "nccl";
};

class NcclCollective final : public Collective {
 public:
  // INVALID_ARGUMENT for a rank outside [0, size); the store's or NCCL's
  // error when the rendezvous fails.
  static absl::StatusOr<std::unique_ptr<NcclCollective>> Create(KeyValueStore& store, int rank, int size,
                                                                NcclOptions options = {});
  ~NcclCollective() override;

  std::string backend() const override { return "nccl"; }
  int rank() const override { return communicator_->rank(); }
  int size() const override { return communicator_->size(); }

  absl::Status AllReduceSum(absl::Span<float> data) override;
  absl::Status AllGatherV(absl::Span<const uint32_t> mine, std::vector<uint32_t>* all,
                          std::vector<size_t>* counts) override;
  absl::Status AllGatherV(absl::Span<const float> mine, std::vector<float>* all,
                          std::vector<size_t>* counts) override;
  absl::Status Broadcast(absl::Span<uint32_t> data, int root) override;
  absl::Status Broadcast(absl::Span<float> data, int root) override;
  absl::Status Barrier() override;
  absl::Status Send(absl::string_view message, int peer, uint32_t tag) override;
  absl::StatusOr<std::string> Recv(int peer, uint32_t tag) override;
  absl::StatusOr<std::string> SendRecv(absl::string_view message, int send_to, int recv_from,
                                       uint32_t tag) override;
  uint64_t bytes_sent() const override { return bytes_sent_; }
  uint64_t bytes_received() const override { return bytes_received_; }

 private:
  NcclCollective(std::unique_ptr<NcclCommunicator> communicator, cudaStream_t stream, absl::Duration timeout);
  // A device staging area of at least `bytes` bytes.
  absl::StatusOr<char*> Staging(size_t bytes, int which);
  template <typename T>
  absl::Status AllGatherVImpl(absl::Span<const T> mine, std::vector<T>* all, std::vector<size_t>* counts);
  absl::Status Wait();

  std::unique_ptr<NcclCommunicator> communicator_;
  cudaStream_t stream_;
  const absl::Duration timeout_;
  DeviceBuffer<char> staging_[2];
  uint64_t bytes_sent_ = 0;
  uint64_t bytes_received_ = 0;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_COLLECTIVE_NCCL_COLLECTIVE_H_
