// Count-Sketch on the GPU: host launchers for the kernels of
// count_sketch_kernels.cu. They use the hash family of common/sketch_hash.h, so
// buckets and signs are bit-identical to the CPU's; estimates computed from the
// same table are bit-identical too. Insert uses atomicAdd, so a cell's sum may
// differ from the CPU's in float rounding (the order of additions differs).
//
// Every launcher validates its arguments, enqueues work on `stream` and
// returns without synchronizing; a launch failure is reported as a Status.
// Device pointers must hold the sizes stated (tables: rows * cols floats).
#ifndef SKETCHFUSE_CUDA_COUNT_SKETCH_KERNELS_H_
#define SKETCHFUSE_CUDA_COUNT_SKETCH_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "common/count_sketch.h"

namespace sketchfuse {

// buckets[j] and signs[j] (+1/-1) of coordinates j < n in row `row`.
absl::Status LaunchSketchHashes(const SketchShape& shape, uint32_t row, uint32_t n,
                                uint32_t* buckets, float* signs, cudaStream_t stream);

// table += Sketch(x) for x of n elements.
absl::Status LaunchCountSketchInsert(const SketchShape& shape, const float* x, uint32_t n,
                                     float* table, cudaStream_t stream);

// table += Sketch(v) for the sparse vector v with v[indices[j]] = values[j],
// j < count (distinct indices, as a top-k selection gives): the CPU's
// CountSketch::InsertEntries up to the order of the additions into a cell
// that several entries share.
absl::Status LaunchCountSketchInsertEntries(const SketchShape& shape, const uint32_t* indices,
                                            const float* values, uint64_t count, float* table,
                                            cudaStream_t stream);

// out[i] = estimate of coordinate i (median over rows) for i < n.
absl::Status LaunchCountSketchEstimate(const SketchShape& shape, const float* table, uint32_t n,
                                       float* out, cudaStream_t stream);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_CUDA_COUNT_SKETCH_KERNELS_H_
