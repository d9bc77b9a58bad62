// The inner loops of Count-Sketch insert and estimate, for one row and one
// block of consecutive coordinates, with an AVX2 fast path chosen at run time.
//
// Both paths compute exactly the hash of common/sketch_hash.h and the same
// float products, so their results are bit-identical (count_sketch_test checks
// each path against the one-coordinate reference).
#ifndef SKETCHFUSE_COMMON_SKETCH_KERNELS_H_
#define SKETCHFUSE_COMMON_SKETCH_KERNELS_H_

#include <cstdint>

#include "common/sketch_hash.h"

namespace sketchfuse {
namespace sketch_kernels {

// buckets[j] = bucket_r(base + j) and signed_values[j] = sign_r(base + j) * x[j]
// for j < len.
void HashBlock(RowHash hash, uint32_t cols, uint32_t base, uint32_t len, const float* x,
               uint32_t* buckets, float* signed_values);

// out[j] = sign_r(base + j) * row[bucket_r(base + j)] for j < len.
void GatherSigned(RowHash hash, uint32_t cols, uint32_t base, uint32_t len, const float* row,
                  float* out);

// Whether the AVX2 path is in use (the CPU has it and it is not disabled).
bool SimdEnabled();

// Forces the portable path (false) or allows the AVX2 path again (true).
// For tests and benchmarks; not thread-safe with concurrent kernel calls.
void SetSimdAllowed(bool allowed);

}  // namespace sketch_kernels
}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_SKETCH_KERNELS_H_
