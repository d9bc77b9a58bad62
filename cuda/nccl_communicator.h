// An NCCL communicator: one rank of a group of GPUs that run collectives
// together. Every call goes through GPU_RETURN_IF_ERROR, so failures come back
// as absl::Status naming the call and NCCL's own message.
//
// Set-up: one rank calls NewNcclUniqueId() and hands the 128 opaque bytes to
// every other rank (through the coordinator's key-value store); each rank then
// calls NcclCommunicator::Create with the same id, its rank and the group
// size. Create blocks until all ranks have joined.
//
// Collectives are enqueued on a stream and return without synchronizing;
// asynchronous failures (a peer lost mid-collective) surface in
// CheckAsyncError(). One communicator must not be used by two threads at once.
// Built only with NCCL (the CUDA toolkit's); absent from CPU-only builds.
#ifndef SKETCHFUSE_CUDA_NCCL_COMMUNICATOR_H_
#define SKETCHFUSE_CUDA_NCCL_COMMUNICATOR_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

struct ncclComm;

namespace sketchfuse {

// A fresh NCCL unique id (kNcclUniqueIdBytes opaque bytes).
absl::StatusOr<std::string> NewNcclUniqueId();
inline constexpr size_t kNcclUniqueIdBytes = 128;

class NcclCommunicator {
 public:
  // Joins the group `unique_id` as `rank` of `size` on CUDA device `device`.
  // INVALID_ARGUMENT for an id of the wrong length or a rank outside [0, size).
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(const std::string& unique_id,
                                                                  int rank, int size,
                                                                  int device);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // recv[i] = sum over ranks of send[i], i < count (send == recv is allowed).
  absl::Status AllReduceSum(const float* send, float* recv, size_t count, cudaStream_t stream);
  // recv holds size() blocks of `count` floats; block r is rank r's send.
  absl::Status AllGather(const float* send, float* recv, size_t count, cudaStream_t stream);
  // Same for 32-bit indices (the index half of sparse payloads).
  absl::Status AllGather(const uint32_t* send, uint32_t* recv, size_t count,
                         cudaStream_t stream);
  // buffer[0, count) of rank `root` is copied to every rank's buffer.
  absl::Status Broadcast(float* buffer, size_t count, int root, cudaStream_t stream);
  absl::Status Broadcast(uint32_t* buffer, size_t count, int root, cudaStream_t stream);

  // Point to point: `bytes` bytes to or from `peer`. NCCL matches a Send with
  // the peer's Recv by order (no tags), so both sides must issue them in the
  // same order. INVALID_ARGUMENT for a peer that is not another rank.
  absl::Status Send(const void* buffer, size_t bytes, int peer, cudaStream_t stream);
  absl::Status Recv(void* buffer, size_t bytes, int peer, cudaStream_t stream);
  // Both at once, in one NCCL group (so two ranks exchanging cannot deadlock).
  // A zero byte count skips that direction.
  absl::Status SendRecv(const void* send, size_t send_bytes, int send_to, void* recv, size_t recv_bytes,
                        int recv_from, cudaStream_t stream);

  // Waits for `stream` up to `timeout`, checking for asynchronous NCCL
  // errors meanwhile. On a timeout the communicator is aborted (it cannot be
  // used again) and DEADLINE_EXCEEDED returned: a lost peer cannot hang the
  // caller.
  absl::Status Synchronize(cudaStream_t stream, absl::Duration timeout);

  // OK unless an earlier collective failed asynchronously.
  absl::Status CheckAsyncError();

 private:
  NcclCommunicator(ncclComm* comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {}

  absl::Status CheckPeer(int peer) const;

  ncclComm* comm_;
  bool aborted_ = false;
  int rank_;
  int size_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_CUDA_NCCL_COMMUNICATOR_H_
