#include "cuda/nccl_communicator.h"

#include <nccl.h>

#include <cstring>

#include "absl/strings/str_cat.h"
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
  if (comm_ != nullptr) ncclCommDestroy(comm_);
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

absl::Status NcclCommunicator::CheckAsyncError() {
  ncclResult_t async_error = ncclSuccess;
  GPU_RETURN_IF_ERROR(ncclCommGetAsyncError(comm_, &async_error), "reading NCCL's async error");
  GPU_RETURN_IF_ERROR(async_error, "an earlier collective");
  return absl::OkStatus();
}

}  // namespace sketchfuse
