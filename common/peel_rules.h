// The per-coordinate rules of the peeling decoder (common/sketch_peeling.h),
// written once for the host and the device: the CPU decoder
// (common/sketch_peeling.cc) and the GPU decoder (cuda/peel_kernels.cu) call
// these same functions, so that given the same row estimates they take the
// same decisions, bit for bit.
//
// A coordinate's row estimates are est[0], est[stride], ..., est[(rows - 1) *
// stride]: sign_r(i) * table[cell_r(i)]. Every comparison is written so that
// the host compiler and nvcc evaluate it alike (a subtraction, a product and
// a comparison: nothing a fused multiply-add could change), and the maximum is
// std::max's (a NaN second argument loses).
#ifndef SKETCHFUSE_COMMON_PEEL_RULES_H_
#define SKETCHFUSE_COMMON_PEEL_RULES_H_

#include <math.h>

#include <cstddef>
#include <cstdint>

#include "common/sketch_hash.h"  // SF_HOST_DEVICE

namespace sketchfuse {
namespace peel_rules {

// std::max(a, b): b only when a < b.
SF_HOST_DEVICE float MaxOf(float a, float b) { return a < b ? b : a; }

// Two row estimates agree when |a - b| <= tolerance * max(|a|, |b|): equal
// sums of the same values, added in another order, differ in their last bits.
SF_HOST_DEVICE bool Agree(float a, float b, float tolerance) {
  return fabsf(a - b) <= tolerance * MaxOf(fabsf(a), fabsf(b));
}

// Whether every row estimate is above the floor. A coordinate with an
// estimate at or below it was never inserted (its cell there is empty), and
// stays so: subtraction only takes out what a taken coordinate put in, and a
// taken coordinate has no empty cell. (NaN is not above the floor.)
SF_HOST_DEVICE bool AboveFloor(const float* est, size_t stride, uint32_t rows, float floor) {
  for (uint32_t r = 0; r < rows; ++r) {
    if (!(fabsf(est[r * stride]) > floor)) return false;
  }
  return true;
}

// Whether two of the rows agree: Claims is true exactly then. Most alive
// coordinates read crowded cells in every row and agree nowhere; this finds
// them with fewer comparisons than Claims' full count.
SF_HOST_DEVICE bool SomePairAgrees(const float* est, size_t stride, uint32_t rows, float tolerance) {
  for (uint32_t a = 0; a + 1 < rows; ++a) {
    for (uint32_t b = a + 1; b < rows; ++b) {
      if (Agree(est[a * stride], est[b * stride], tolerance)) return true;
    }
  }
  return false;
}

// What a coordinate claims in one pass.
struct Claim {
  float value = 0;     // the value its largest group of agreeing rows reads
  uint64_t rows = 0;   // the rows whose cells it claims (bit r: row r)
  uint32_t agree = 0;  // rows in its largest group of agreeing rows
  bool takeable = false;
};

// What a coordinate above the floor claims, if anything: its largest groups
// of agreeing rows, if they have two rows or more (then true): it claims
// their cells, and it is takeable, with the group's value, when that group is
// the only largest one. (Two rows that hold the coordinate and the same other
// coordinate agree on a wrong value; while another pair agrees on the right
// one, the coordinate waits for the pass after that other coordinate was
// taken out, and meanwhile keeps the cells it may own from being explained
// by a coordinate that only collides with it.) rows <= 64.
SF_HOST_DEVICE bool Claims(const float* est, size_t stride, uint32_t rows, float tolerance, Claim* out) {
  uint32_t best = 0;
  uint64_t groups = 0;  // union of the largest groups
  bool ambiguous = false;
  for (uint32_t a = 0; a < rows; ++a) {
    const float value = est[a * stride];
    uint64_t mask = 0;
    uint32_t count = 0;
    for (uint32_t b = 0; b < rows; ++b) {
      if (Agree(value, est[b * stride], tolerance)) {
        mask |= uint64_t{1} << b;
        ++count;
      }
    }
    if (count > best) {
      best = count;
      ambiguous = false;
      groups = mask;
      out->value = value;
    } else if (count == best && (mask & ~groups) != 0) {
      ambiguous = true;  // another group of rows, as large, agrees on another value
      groups |= mask;
    }
  }
  out->rows = groups;
  out->agree = best;
  out->takeable = !ambiguous;
  return best >= 2;
}

}  // namespace peel_rules
}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_PEEL_RULES_H_
