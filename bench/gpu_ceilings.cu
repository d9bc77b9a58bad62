#include "bench/gpu_ceilings.h"

#include "common/sketch_hash.h"
#include "cuda/cuda_check.h"
#include "cuda/launch_config.h"

namespace sketchfuse {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ uint32_t CellOf(uint64_t op, uint32_t cells) {
  return BucketOf(Fmix32(static_cast<uint32_t>(op) ^ static_cast<uint32_t>(op >> 32) * 0x9E3779B9u),
                  cells);
}

__global__ void ReductionsKernel(float* table, uint32_t cells, uint64_t ops) {
  for (uint64_t op = blockIdx.x * blockDim.x + threadIdx.x; op < ops;
       op += gridDim.x * blockDim.x) {
    atomicAdd(table + CellOf(op, cells), 1.0f);
  }
}

__global__ void LoadsKernel(const float* table, uint32_t cells, uint64_t ops, float* sink) {
  float sum = 0.0f;
  const uint64_t thread = blockIdx.x * blockDim.x + threadIdx.x;
  for (uint64_t op = thread; op < ops; op += gridDim.x * blockDim.x) {
    sum += __ldg(table + CellOf(op, cells));
  }
  sink[thread] = sum;
}

}  // namespace

absl::Status LaunchScatteredReductions(float* table, uint32_t cells, uint64_t ops,
                                       cudaStream_t stream) {
  if (ops == 0 || cells == 0) return absl::OkStatus();
  ReductionsKernel<<<PersistentBlocks(kThreads, ops), kThreads, 0, stream>>>(table, cells, ops);
  GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the scattered reductions");
  return absl::OkStatus();
}

absl::Status LaunchScatteredLoads(const float* table, uint32_t cells, uint64_t ops, float* sink,
                                  cudaStream_t stream) {
  if (ops == 0 || cells == 0) return absl::OkStatus();
  LoadsKernel<<<PersistentBlocks(kThreads, ops), kThreads, 0, stream>>>(table, cells, ops, sink);
  GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the scattered loads");
  return absl::OkStatus();
}

}  // namespace sketchfuse
