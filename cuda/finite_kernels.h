// Finding non-finite values on the GPU: what a front end checks before a
// gradient in device memory enters error feedback (a NaN or an infinity
// would reach every rank's residual through the collective).
#ifndef SKETCHFUSE_CUDA_FINITE_KERNELS_H_
#define SKETCHFUSE_CUDA_FINITE_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace sketchfuse {

// *first (device memory) = the smallest i < n with x[i] NaN or infinite, or
// UINT64_MAX when every x[i] is finite. Enqueues on `stream` and returns
// without synchronizing.
absl::Status LaunchFirstNonFinite(const float* x, uint64_t n, unsigned long long* first, cudaStream_t stream);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_CUDA_FINITE_KERNELS_H_
