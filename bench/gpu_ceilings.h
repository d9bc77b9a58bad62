// Hardware ceilings for the GPU benchmark, measured in the same run as the
// kernels they bound: `ops` float reductions (RED.ADD) or loads at hashed,
// scattered addresses of a `cells`-float table, the access pattern of a
// Count-Sketch insert and estimate without any of their other work.
#ifndef SKETCHFUSE_BENCH_GPU_CEILINGS_H_
#define SKETCHFUSE_BENCH_GPU_CEILINGS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace sketchfuse {

absl::Status LaunchScatteredReductions(float* table, uint32_t cells, uint64_t ops,
                                       cudaStream_t stream);

// Sums the loaded values per thread into sink[thread] (so no load is elided);
// sink holds one float per thread of a persistent 256-thread grid (at most
// 1 << 20 floats).
absl::Status LaunchScatteredLoads(const float* table, uint32_t cells, uint64_t ops, float* sink,
                                  cudaStream_t stream);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_BENCH_GPU_CEILINGS_H_
