// Hardware ceilings for the GPU benchmark, measured in the same run as the
// kernels they bound: `ops` float reductions (RED.ADD) or loads into a
// `cells`-float table, in runs of `run_length` consecutive cells that start
// at hashed cells (wrapping around the table's end): the access pattern of a
// Count-Sketch insert and estimate without any of their other work. Operation
// j goes to cell (start(j / run_length) + j % run_length) mod cells, and a
// warp's lanes take consecutive j. run_length 1 is the fully scattered
// pattern of a hash with one random cell per coordinate; kMaxChunkLength is
// the pattern of SketchFuse's chunked hash family on wide sketches.
#ifndef SKETCHFUSE_BENCH_GPU_CEILINGS_H_
#define SKETCHFUSE_BENCH_GPU_CEILINGS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace sketchfuse {

// cells >= 1 and run_length a power of two (else INVALID_ARGUMENT, nothing
// launched).
absl::Status LaunchHashedReductions(float* table, uint32_t cells, uint64_t ops,
                                    uint32_t run_length, cudaStream_t stream);

// The same pattern of loads. Sums the loaded values per thread into sink[thread] (so no load is elided);
// sink holds one float per thread of a persistent 256-thread grid (at most
// 1 << 20 floats).
absl::Status LaunchHashedLoads(const float* table, uint32_t cells, uint64_t ops,
                               uint32_t run_length, float* sink, cudaStream_t stream);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_BENCH_GPU_CEILINGS_H_
