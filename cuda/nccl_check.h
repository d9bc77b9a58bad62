// GpuCallStatus for NCCL results, so GPU_RETURN_IF_ERROR (cuda/cuda_check.h)
// checks NCCL calls too. Include after nccl.h, in .cc files only.
#ifndef SKETCHFUSE_CUDA_NCCL_CHECK_H_
#define SKETCHFUSE_CUDA_NCCL_CHECK_H_

#include <nccl.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "cuda/cuda_check.h"

namespace sketchfuse {

// ncclInvalidArgument and ncclInvalidUsage map to INVALID_ARGUMENT, a
// remote (peer) error to UNAVAILABLE, anything else to INTERNAL. The message
// carries NCCL's last error text.
inline absl::Status GpuCallStatus(ncclResult_t result, absl::string_view call,
                                  absl::string_view context) {
  if (result == ncclSuccess || result == ncclInProgress) return absl::OkStatus();
  const char* detail = ncclGetLastError(nullptr);
  const std::string message =
      absl::StrCat(context, ": ", call, " failed: ", ncclGetErrorString(result),
                   (detail != nullptr && detail[0] != '\0') ? absl::StrCat(" (", detail, ")") : "");
  switch (result) {
    case ncclInvalidArgument:
    case ncclInvalidUsage: return absl::InvalidArgumentError(message);
    case ncclRemoteError: return absl::UnavailableError(message);
    default: return absl::InternalError(message);
  }
}

}  // namespace sketchfuse

#endif  // SKETCHFUSE_CUDA_NCCL_CHECK_H_
