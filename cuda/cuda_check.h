// One checking macro for every CUDA runtime and NCCL call.
//
//   GPU_RETURN_IF_ERROR(cudaMemcpyAsync(...), "copying the gradient");
//   GPU_RETURN_IF_ERROR(ncclAllReduce(...), "allreducing the sketch");
//
// The macro turns the call's result into an absl::Status with the overloads
// of GpuCallStatus: this header's for cudaError_t, cuda/nccl_check.h's for
// ncclResult_t. On failure the status names the call, the error and the
// context. A CUDA failure also clears the (non-sticky) error state with
// cudaGetLastError; out-of-memory maps to RESOURCE_EXHAUSTED, a missing
// device to UNAVAILABLE, bad arguments to INVALID_ARGUMENT, anything else to
// INTERNAL.
#ifndef SKETCHFUSE_CUDA_CUDA_CHECK_H_
#define SKETCHFUSE_CUDA_CUDA_CHECK_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace sketchfuse {

inline absl::Status GpuCallStatus(cudaError_t error, absl::string_view call,
                                      absl::string_view context) {
  if (error == cudaSuccess) return absl::OkStatus();
  (void)cudaGetLastError();
  const std::string message = absl::StrCat(context, ": ", call, " failed: ",
                                           cudaGetErrorName(error), " (",
                                           cudaGetErrorString(error), ")");
  switch (error) {
    case cudaErrorMemoryAllocation: return absl::ResourceExhaustedError(message);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver: return absl::UnavailableError(message);
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer: return absl::InvalidArgumentError(message);
    default: return absl::InternalError(message);
  }
}

}  // namespace sketchfuse

#define GPU_RETURN_IF_ERROR(call, context)                                         \
  do {                                                                             \
    ::absl::Status sf_gpu_status_ = ::sketchfuse::GpuCallStatus((call), #call, (context)); \
    if (!sf_gpu_status_.ok()) return sf_gpu_status_;                               \
  } while (false)

#endif  // SKETCHFUSE_CUDA_CUDA_CHECK_H_
