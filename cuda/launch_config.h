// Grid sizes for the kernels of cuda/: a persistent grid (enough resident
// blocks to fill every multiprocessor once) for grid-stride loops over large
// vectors, and a ceiling division for one-thread-per-item kernels.
#ifndef SKETCHFUSE_CUDA_LAUNCH_CONFIG_H_
#define SKETCHFUSE_CUDA_LAUNCH_CONFIG_H_

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

namespace sketchfuse {

// Blocks of `threads_per_block` that keep the current device's multiprocessors
// full (2048 resident threads each on sm_80/sm_90), but never more than
// needed to give each thread one of `items`. At least 1.
inline int PersistentBlocks(int threads_per_block, uint64_t items) {
  int device = 0;
  int multiprocessors = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device) !=
          cudaSuccess) {
    (void)cudaGetLastError();
    multiprocessors = 1;
  }
  const uint64_t full = static_cast<uint64_t>(multiprocessors) * (2048 / threads_per_block);
  const uint64_t needed = (items + threads_per_block - 1) / threads_per_block;
  return static_cast<int>(std::max<uint64_t>(1, std::min(full, needed)));
}

// ceil(items / per_block), at least 1.
inline uint64_t BlocksToCover(uint64_t items, uint64_t per_block) {
  return std::max<uint64_t>(1, (items + per_block - 1) / per_block);
}

}  // namespace sketchfuse

#endif  // SKETCHFUSE_CUDA_LAUNCH_CONFIG_H_
