// The inner loops of Count-Sketch insert and estimate: one run of consecutive
// coordinates whose cells are consecutive too (part of a chunk, see
// common/sketch_hash.h), with an AVX2 fast path chosen at run time.
//
// Both paths compute exactly the sign hash of common/sketch_hash.h and the
// same float operations, so their results are bit-identical (count_sketch_test
// checks each path against the one-coordinate reference).
#ifndef SKETCHFUSE_COMMON_SKETCH_KERNELS_H_
#define SKETCHFUSE_COMMON_SKETCH_KERNELS_H_

#include <cstdint>

#include "common/sketch_hash.h"

namespace sketchfuse {
namespace sketch_kernels {

// dst[j] += sign(base + j) * x[j] for j < len: one run of a chunk added into
// its consecutive cells (sign from the row's sign hash).
void AddSigned(MultiplyAddShift sign, uint32_t base, uint32_t len, const float* x, float* dst);

// out[j] = sign(base + j) * cells[j] for j < len: one run of a chunk's cells
// read back with its coordinates' signs.
void CopySigned(MultiplyAddShift sign, uint32_t base, uint32_t len, const float* cells,
                float* out);

// Whether the AVX2 path is in use (the CPU has it and it is not disabled).
bool SimdEnabled();

// Forces the portable path (false) or allows the AVX2 path again (true).
// For tests and benchmarks; not thread-safe with concurrent kernel calls.
void SetSimdAllowed(bool allowed);

}  // namespace sketch_kernels
}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_SKETCH_KERNELS_H_
