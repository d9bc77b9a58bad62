#include "cuda/nccl_communicator.h"

#include <nccl.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cuda/cuda_check.h"
#include "cuda/nccl_check.h"

namespace sketchfuse {

static_assert(sizeof(ncclUniqueId) == kNcclUniqueIdBytes, "NCCL's unique id changed size");

absl::StatusOr<std::string> NewNcclUniqueId() {
  ncclUniqueId id;
  GPU_RETURN_IF_ERROR(ncclGetUniqueId(&id), "making an NCCL unique id");
  return std::string(id.internal, sizeof(id.internal));
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    const std::string& unique_id, int rank, int size, int device) {
  if (unique_id.size() != kNcclUniqueIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat("an NCCL unique id has ", kNcclUniqueIdBytes,
                                                   " bytes; got ", unique_id.size()));
  }
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL rank ", rank, " is outside a group of ", size));
  }
  ncclUniqueId id;
  std::memcpy(id.internal, unique_id.data(), sizeof(id.internal));
  GPU_RETURN_IF_ERROR(cudaSetDevice(device), absl::StrCat("selecting CUDA device ", device));
  ncclComm_t comm = nullptr;
  GPU_RETURN_IF_ERROR(ncclCommInitRank(&comm, size, id, rank),
                      absl::StrCat("joining the NCCL group as rank ", rank, " of ", size));
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(comm, rank, size));
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ != nullptr && !aborted_) ncclCommDestroy(comm_);
}

absl::Status NcclCommunicator::AllReduceSum(const float* send, float* recv, size_t count,
                                            cudaStream_t stream) {
  GPU_RETURN_IF_ERROR(ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, comm_, stream),
                      "allreduce");
  return absl::OkStatus();
}

absl::Status NcclCommunicator::AllGather(const float* send, float* recv, size_t count,
                                         cudaStream_t stream) {
  GPU_RETURN_IF_ERROR(ncclAllGather(send, recv, count, ncclFloat32, comm_, stream), "allgather");
  return absl::OkStatus();
}

absl::Status NcclCommunicator::AllGather(const uint32_t* send, uint32_t* recv, size_t count,
                                         cudaStream_t stream) {
  GPU_RETURN_IF_ERROR(ncclAllGather(send, recv, count, ncclUint32, comm_, stream), "allgather");
  return absl::OkStatus();
}

absl::Status NcclCommunicator::Broadcast(float* buffer, size_t count, int root,
                                         cudaStream_t stream) {
  if (root < 0 || root >= size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("broadcast root ", root, " is outside a group of ", size_));
  }
  GPU_RETURN_IF_ERROR(ncclBroadcast(buffer, buffer, count, ncclFloat32, root, comm_, stream),
                      "broadcast");
  return absl::OkStatus();
}

absl::Status NcclCommunicator::Broadcast(uint32_t* buffer, size_t count, int root,
                                         cudaStream_t stream) {
  if (root < 0 || root >= size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("broadcast root ", root, " is outside a group of ", size_));
  }
  GPU_RETURN_IF_ERROR(ncclBroadcast(buffer, buffer, count, ncclUint32, root, comm_, stream),
                      "broadcast");
  return absl::OkStatus();
}

absl::Status NcclCommunicator::CheckPeer(int peer) const {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    return absl::InvalidArgumentError(absl::StrCat("peer ", peer, " is not another rank of ", size_,
                                                   " (this is rank ", rank_, ")"));
  }
  return absl::OkStatus();
}

absl::Status NcclCommunicator::Send(const void* buffer, size_t bytes, int peer, cudaStream_t stream) {
  if (absl::Status s = CheckPeer(peer); !s.ok()) return s;
  GPU_RETURN_IF_ERROR(ncclSend(buffer, bytes, ncclUint8, peer, comm_, stream),
                      absl::StrCat("sending to rank ", peer));
  return absl::OkStatus();
}

absl::Status NcclCommunicator::Recv(void* buffer, size_t bytes, int peer, cudaStream_t stream) {
  if (absl::Status s = CheckPeer(peer); !s.ok()) return s;
  GPU_RETURN_IF_ERROR(ncclRecv(buffer, bytes, ncclUint8, peer, comm_, stream),
                      absl::StrCat("receiving from rank ", peer));
  return absl::OkStatus();
}

absl::Status NcclCommunicator::SendRecv(const void* send, size_t send_bytes, int send_to, void* recv,
                                        size_t recv_bytes, int recv_from, cudaStream_t stream) {
  if (absl::Status s = CheckPeer(send_to); !s.ok()) return s;
  if (absl::Status s = CheckPeer(recv_from); !s.ok()) return s;
  GPU_RETURN_IF_ERROR(ncclGroupStart(), "starting a send/recv group");
  ncclResult_t sent = ncclSuccess, received = ncclSuccess;
  if (send_bytes > 0) sent = ncclSend(send, send_bytes, ncclUint8, send_to, comm_, stream);
  if (recv_bytes > 0) received = ncclRecv(recv, recv_bytes, ncclUint8, recv_from, comm_, stream);
  GPU_RETURN_IF_ERROR(ncclGroupEnd(), "ending a send/recv group");
  GPU_RETURN_IF_ERROR(sent, absl::StrCat("sending to rank ", send_to));
  GPU_RETURN_IF_ERROR(received, absl::StrCat("receiving from rank ", recv_from));
  return absl::OkStatus();
}

absl::Status NcclCommunicator::Synchronize(cudaStream_t stream, absl::Duration timeout) {
  if (aborted_) return absl::FailedPreconditionError("the NCCL communicator was aborted after a timeout");
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const cudaError_t state = cudaStreamQuery(stream);
    if (state == cudaSuccess) return CheckAsyncError();
    if (state != cudaErrorNotReady) {
      GPU_RETURN_IF_ERROR(state, "waiting for the NCCL stream");
    }
    if (absl::Status s = CheckAsyncError(); !s.ok()) return s;
    if (absl::Now() > deadline) {
      ncclCommAbort(comm_);
      aborted_ = true;
      return absl::DeadlineExceededError(absl::StrCat("NCCL collectives did not finish within ",
                                                      absl::FormatDuration(timeout),
                                                      " (a peer lost?); the communicator was aborted"));
    }
    absl::SleepFor(absl::Microseconds(20));
  }
}

absl::Status NcclCommunicator::CheckAsyncError() {
  ncclResult_t async_error = ncclSuccess;
  GPU_RETURN_IF_ERROR(ncclCommGetAsyncError(comm_, &async_error), "reading NCCL's async error");
  GPU_RETURN_IF_ERROR(async_error, "an earlier collective");
  return absl::OkStatus();
}

}  // namespace sketchfuse
