#include "cuda/sparse_kernels.h"

#include "cuda/cuda_check.h"
#include "cuda/launch_config.h"

namespace sketchfuse {
namespace {

constexpr int kThreads = 256;

enum class Op { kGather, kAdd, kSet };

template <Op kOp>
__global__ void SparseKernel(float* dense, uint64_t n, const uint32_t* indices, float* values,
                             uint64_t count, uint32_t* bad_indices) {
  for (uint64_t j = blockIdx.x * blockDim.x + threadIdx.x; j < count;
       j += gridDim.x * blockDim.x) {
    const uint32_t i = indices[j];
    if (i >= n) {
      if (bad_indices != nullptr) atomicAdd(bad_indices, 1u);
      if constexpr (kOp == Op::kGather) values[j] = 0.0f;
      continue;
    }
    if constexpr (kOp == Op::kGather) {
      values[j] = dense[i];
    } else if constexpr (kOp == Op::kAdd) {
      atomicAdd(dense + i, values[j]);
    } else {
      dense[i] = values[j];
    }
  }
}

template <Op kOp>
absl::Status Launch(float* dense, uint64_t n, const uint32_t* indices, float* values,
                    uint64_t count, uint32_t* bad_indices, cudaStream_t stream,
                    const char* context) {
  if (count == 0) return absl::OkStatus();
  if (dense == nullptr || indices == nullptr || values == nullptr) {
    return absl::InvalidArgumentError(std::string(context) + ": null device pointer");
  }
  SparseKernel<kOp><<<PersistentBlocks(kThreads, count), kThreads, 0, stream>>>(
      dense, n, indices, values, count, bad_indices);
  GPU_RETURN_IF_ERROR(cudaGetLastError(), context);
  return absl::OkStatus();
}

}  // namespace

absl::Status LaunchGather(const float* dense, uint64_t n, const uint32_t* indices, uint64_t count,
                          float* values, uint32_t* bad_indices, cudaStream_t stream) {
  return Launch<Op::kGather>(const_cast<float*>(dense), n, indices, values, count, bad_indices,
                             stream, "launching the sparse gather");
}

absl::Status LaunchScatterAdd(const uint32_t* indices, const float* values, uint64_t count,
                              float* dense, uint64_t n, uint32_t* bad_indices,
                              cudaStream_t stream) {
  return Launch<Op::kAdd>(dense, n, indices, const_cast<float*>(values), count, bad_indices,
                          stream, "launching the sparse scatter-add");
}

absl::Status LaunchScatterSet(const uint32_t* indices, const float* values, uint64_t count,
                              float* dense, uint64_t n, uint32_t* bad_indices,
                              cudaStream_t stream) {
  return Launch<Op::kSet>(dense, n, indices, const_cast<float*>(values), count, bad_indices,
                          stream, "launching the sparse scatter-set");
}

}  // namespace sketchfuse
