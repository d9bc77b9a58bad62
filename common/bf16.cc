#include "common/bf16.h"

#include <cstring>

namespace sketchfuse {

uint16_t FloatToBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // quiet NaN
  // Round to nearest, ties to even: add just under half an ulp, plus the
  // lowest kept bit. A carry out of the mantissa correctly bumps the
  // exponent, up to infinity.
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float Bf16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

std::string Bf16Bytes(absl::Span<const float> x) {
  std::string bytes(2 * x.size(), '\0');
  for (size_t i = 0; i < x.size(); ++i) {
    const uint16_t b = FloatToBf16(x[i]);
    std::memcpy(bytes.data() + 2 * i, &b, sizeof(b));
  }
  return bytes;
}

float Bf16ValueAt(absl::string_view bytes, size_t i) {
  uint16_t b;
  std::memcpy(&b, bytes.data() + 2 * i, sizeof(b));
  return Bf16ToFloat(b);
}

void RoundToBf16(absl::Span<float> x) {
  for (float& v : x) v = Bf16ToFloat(FloatToBf16(v));
}

bool HoldsExactlyAsBf16(absl::Span<const float> x) {
  if (x.empty()) return false;
  for (float v : x) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    if ((bits & 0xFFFFu) != 0) return false;
  }
  return true;
}

}  // namespace sketchfuse
