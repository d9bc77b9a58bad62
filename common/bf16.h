// bfloat16: float32's sign, its 8-bit exponent and the top 7 bits of its
// mantissa. Every finite gradient keeps its order of magnitude (no overflow,
// no flush to zero), at a relative precision of 2^-8. Used where values may
// lose precision without breaking an invariant: the dense_bf16_allreduce
// ring (worker/decentralized/bf16_ring.h), and the fixed sketch's table,
// which only selects candidates (count_sketch table=bf16; the push codec
// then sends 2 bytes a cell, proto/payload.proto's bf16_values).
#ifndef SKETCHFUSE_COMMON_BF16_H_
#define SKETCHFUSE_COMMON_BF16_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace sketchfuse {

// The bfloat16 nearest to x (ties to even); NaN stays NaN (quiet, same
// sign), infinities stay infinite, and finite values beyond bfloat16's
// largest round to infinity as IEEE rounding says.
uint16_t FloatToBf16(float x);
// Exact: the float whose upper 16 bits are `b`.
float Bf16ToFloat(uint16_t b);

// Unit roundoff of bfloat16 (8 significant bits): |FloatToBf16(x) - x| <=
// kBf16UnitRoundoff * |x| for finite x within range.
inline constexpr double kBf16UnitRoundoff = 1.0 / 256.0;

// The values of `x` rounded to bfloat16 (FloatToBf16), as 2 little-endian
// bytes each: the wire form of the bf16 ring's messages and of a payload's
// bf16_values.
std::string Bf16Bytes(absl::Span<const float> x);
// The float of value `i` of such bytes (exact: Bf16ToFloat). The caller
// checks that 2 * i + 2 <= bytes.size().
float Bf16ValueAt(absl::string_view bytes, size_t i);

// x[i] = Bf16ToFloat(FloatToBf16(x[i])) for every i.
void RoundToBf16(absl::Span<float> x);

// True if `x` is not empty and bfloat16 holds every value exactly (the lower
// 16 bits of each are zero), so 2 bytes a value carry it losslessly. Stops
// at the first value that does not fit.
bool HoldsExactlyAsBf16(absl::Span<const float> x);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_BF16_H_
