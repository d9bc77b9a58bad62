#include "cuda/finite_kernels.h"

#include "cuda/cuda_check.h"
#include "cuda/launch_config.h"

namespace sketchfuse {
namespace {

constexpr int kThreads = 256;

// Each thread keeps the first non-finite index of its stride; a warp
// reduces them, and one atomicMin per warp leaves the smallest.
__global__ void __launch_bounds__(kThreads) FirstNonFiniteKernel(const float* x, uint64_t n, unsigned long long* first) {
  unsigned long long mine = ~0ull;
  for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    if (!isfinite(x[i])) {
      mine = i;
      break;  // later indices of this thread's stride are larger
    }
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) mine = min(mine, __shfl_down_sync(0xFFFFFFFFu, mine, offset));
  if ((threadIdx.x & 31) == 0 && mine != ~0ull) atomicMin(first, mine);
}

}  // namespace

absl::Status LaunchFirstNonFinite(const float* x, uint64_t n, unsigned long long* first, cudaStream_t stream) {
  GPU_RETURN_IF_ERROR(cudaMemsetAsync(first, 0xFF, sizeof(unsigned long long), stream), "clearing a search");
  if (n == 0) return absl::OkStatus();
  FirstNonFiniteKernel<<<PersistentBlocks(kThreads, n), kThreads, 0, stream>>>(x, n, first);
  GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the non-finite search");
  return absl::OkStatus();
}

}  // namespace sketchfuse
