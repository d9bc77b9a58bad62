#include "cuda/error_feedback_kernels.h"

#include "absl/strings/str_cat.h"
#include "cuda/cuda_check.h"
#include "cuda/launch_config.h"

namespace sketchfuse {
namespace {

constexpr int kThreads = 256;

template <bool kMomentum>
__global__ void AccumulateKernel(const float* __restrict__ grad, uint64_t n, float momentum,
                                 float* __restrict__ velocity, float* __restrict__ residual) {
  for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float u = grad[i];
    if constexpr (kMomentum) {
      u = __fadd_rn(__fmul_rn(momentum, velocity[i]), u);
      velocity[i] = u;
    }
    residual[i] = __fadd_rn(residual[i], u);
  }
}

__global__ void ClearKernel(const uint32_t* indices, uint64_t count, uint64_t n, float* residual,
                            float* velocity) {
  for (uint64_t j = blockIdx.x * blockDim.x + threadIdx.x; j < count;
       j += gridDim.x * blockDim.x) {
    const uint32_t i = indices[j];
    if (i >= n) continue;
    residual[i] = 0.0f;
    if (velocity != nullptr) velocity[i] = 0.0f;
  }
}

__global__ void KeepKernel(const uint32_t* indices, uint64_t count, uint64_t n, float kept, float* residual,
                           float* velocity) {
  for (uint64_t j = blockIdx.x * blockDim.x + threadIdx.x; j < count; j += gridDim.x * blockDim.x) {
    const uint32_t i = indices[j];
    if (i >= n) continue;
    residual[i] = __fadd_rn(0.0f, __fmul_rn(kept, residual[i]));
    if (velocity != nullptr) velocity[i] = 0.0f;
  }
}

__global__ void ScaleKernel(float* x, uint64_t n, float factor) {
  for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    x[i] = __fmul_rn(factor, x[i]);
  }
}

__global__ void SquaredNormKernel(const float* x, uint64_t n, double* out) {
  double sum = 0;
  for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const double v = x[i];
    sum += v * v;
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_down_sync(0xFFFFFFFFu, sum, offset);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, sum);
}

}  // namespace

absl::Status LaunchKeepApplied(const uint32_t* indices, uint64_t count, uint64_t n, float kept, float* residual,
                               float* velocity, cudaStream_t stream) {
  if (count == 0) return absl::OkStatus();
  KeepKernel<<<PersistentBlocks(kThreads, count), kThreads, 0, stream>>>(indices, count, n, kept, residual, velocity);
  GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the capped release");
  return absl::OkStatus();
}

absl::Status LaunchScale(float* x, uint64_t n, float factor, cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  ScaleKernel<<<PersistentBlocks(kThreads, n), kThreads, 0, stream>>>(x, n, factor);
  GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the residual's rescale");
  return absl::OkStatus();
}

absl::Status LaunchSquaredNorm(const float* x, uint64_t n, double* out, cudaStream_t stream) {
  GPU_RETURN_IF_ERROR(cudaMemsetAsync(out, 0, sizeof(double), stream), "clearing a norm");
  if (n == 0) return absl::OkStatus();
  SquaredNormKernel<<<PersistentBlocks(kThreads, n), kThreads, 0, stream>>>(x, n, out);
  GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the squared norm");
  return absl::OkStatus();
}

absl::Status LaunchErrorFeedbackAccumulate(const float* grad, uint64_t n, float momentum,
                                           float* velocity, float* residual,
                                           cudaStream_t stream) {
  if (velocity != nullptr && !(momentum >= 0.0f && momentum < 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("momentum must be in [0, 1); got ", momentum));
  }
  if (n == 0) return absl::OkStatus();
  const int blocks = PersistentBlocks(kThreads, n);
  if (velocity != nullptr) {
    AccumulateKernel<true><<<blocks, kThreads, 0, stream>>>(grad, n, momentum, velocity, residual);
  } else {
    AccumulateKernel<false><<<blocks, kThreads, 0, stream>>>(grad, n, 0.0f, nullptr, residual);
  }
  GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the error-feedback update");
  return absl::OkStatus();
}

absl::Status LaunchClearApplied(const uint32_t* indices, uint64_t count, uint64_t n,
                                float* residual, float* velocity, cudaStream_t stream) {
  if (count == 0) return absl::OkStatus();
  ClearKernel<<<PersistentBlocks(kThreads, count), kThreads, 0, stream>>>(indices, count, n,
                                                                           residual, velocity);
  GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the applied-coordinate clear");
  return absl::OkStatus();
}

}  // namespace sketchfuse
