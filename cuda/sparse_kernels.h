// Sparse (index, value) pairs against dense vectors on the GPU: the gather
// that builds a Top-k payload, and the scatters that apply a sparse update.
//
// Indices must be < n (the dense vector's size); they are checked on the
// device and an out-of-range index is skipped and counted in *bad_indices
// when that pointer is given (a corrupted payload must not write outside the
// vector). For the scatters, indices must be distinct (payloads and top-k
// selections have strictly ascending indices); ScatterAdd with repeated
// indices is still correct (atomic), ScatterSet keeps one of the values.
// Launchers enqueue on `stream` and return without synchronizing.
#ifndef SKETCHFUSE_CUDA_SPARSE_KERNELS_H_
#define SKETCHFUSE_CUDA_SPARSE_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace sketchfuse {

// values[j] = dense[indices[j]] for j < count.
absl::Status LaunchGather(const float* dense, uint64_t n, const uint32_t* indices, uint64_t count,
                          float* values, uint32_t* bad_indices, cudaStream_t stream);

// dense[indices[j]] += values[j] for j < count.
absl::Status LaunchScatterAdd(const uint32_t* indices, const float* values, uint64_t count,
                              float* dense, uint64_t n, uint32_t* bad_indices,
                              cudaStream_t stream);

// dense[indices[j]] = values[j] for j < count (the rest of dense unchanged).
absl::Status LaunchScatterSet(const uint32_t* indices, const float* values, uint64_t count,
                              float* dense, uint64_t n, uint32_t* bad_indices,
                              cudaStream_t stream);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_CUDA_SPARSE_KERNELS_H_
