// The bfloat16 conversion against a double-precision reference (ties to
// even, NaN, infinities, overflow, subnormals), the rounding of spans and the
// exactness test the push codec relies on.
#include "common/bf16.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

uint32_t Bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof(b));
  return b;
}

// The bfloat16 nearest to finite x by exhaustive comparison of the two
// neighbours (truncation, and truncation plus one ulp), ties to even.
float ReferenceBf16(float x) {
  const uint32_t down = Bits(x) & 0xFFFF0000u;
  const uint32_t up = down + 0x10000u;
  float lo, hi;
  std::memcpy(&lo, &down, sizeof(lo));
  std::memcpy(&hi, &up, sizeof(hi));
  const double dlo = std::abs(static_cast<double>(x) - lo), dhi = std::abs(static_cast<double>(hi) - x);
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hi;
  return ((down >> 16) & 1u) == 0 ? lo : hi;
}

TEST(Bf16Test, RoundsToNearestEvenLikeTheReference) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any;
  int checked = 0;
  for (int i = 0; i < 1000000; ++i) {
    float x;
    const uint32_t bits = any(rng);
    std::memcpy(&x, &bits, sizeof(x));
    if (!std::isfinite(x) || std::abs(x) > 3.3e38f) continue;  // the reference's "up" must stay finite
    ASSERT_EQ(Bf16ToFloat(FloatToBf16(x)), ReferenceBf16(x)) << std::hexfloat << x;
    ++checked;
  }
  EXPECT_GT(checked, 900000);
}

TEST(Bf16Test, ExactValuesTiesAndBounds) {
  for (float x : {0.0f, 1.0f, -2.0f, 0.5f, 3.0f, 1.0078125f /* 1 + 2^-7 */, 65536.0f}) {
    EXPECT_EQ(Bf16ToFloat(FloatToBf16(x)), x) << x;
  }
  // Halfway between 1 and 1 + 2^-7: to 1 (even); between 1 + 2^-7 and 1 + 2^-6: up (even).
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + 0x1p-8f)), 1.0f);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + 3 * 0x1p-8f)), 1.0f + 0x1p-6f);
  // Negative zero keeps its sign; NaN stays NaN; infinities stay; beyond
  // bfloat16's largest finite value is infinity.
  EXPECT_EQ(FloatToBf16(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::quiet_NaN()))));
  uint32_t signaling_bits = 0x7F800001u;  // a NaN whose payload lies in the dropped bits
  float signaling;
  std::memcpy(&signaling, &signaling_bits, sizeof(signaling));
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(signaling))));
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::infinity())), std::numeric_limits<float>::infinity());
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(-std::numeric_limits<float>::infinity())),
            -std::numeric_limits<float>::infinity());
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::max())), std::numeric_limits<float>::infinity());
  // Float32's range: tiny gradients do not flush to zero (float16 would
  // below 6e-8); subnormals round to bfloat16's subnormal spacing, 2^-133.
  for (float x : {1e-30f, -3e-20f, 1e-38f, 1e30f}) {
    const float b = Bf16ToFloat(FloatToBf16(x));
    EXPECT_LE(std::abs(b - x), kBf16UnitRoundoff * std::abs(x)) << x;
  }
  EXPECT_NE(Bf16ToFloat(FloatToBf16(1e-40f)), 0.0f);
  EXPECT_LE(std::abs(Bf16ToFloat(FloatToBf16(1e-40f)) - 1e-40f), 0x1p-134f);
}

TEST(Bf16Test, RoundedSpansHoldExactlyAndOthersDoNot) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (size_t n : {1, 2, 7, 100, 4097}) {
    std::vector<float> x(n);
    for (float& v : x) v = normal(rng) * 1e-3f;
    EXPECT_FALSE(HoldsExactlyAsBf16(x)) << n;  // random floats use their low bits
    std::vector<float> rounded = x;
    RoundToBf16(absl::MakeSpan(rounded));
    EXPECT_TRUE(HoldsExactlyAsBf16(rounded)) << n;
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(rounded[i], Bf16ToFloat(FloatToBf16(x[i])));
      EXPECT_LE(std::abs(rounded[i] - x[i]), kBf16UnitRoundoff * std::abs(x[i]));
    }
    // One value off bfloat16's grid anywhere is enough to refuse.
    rounded[n / 2] = std::nextafter(rounded[n / 2], 1.0f);
    EXPECT_FALSE(HoldsExactlyAsBf16(rounded)) << n;
  }
  EXPECT_FALSE(HoldsExactlyAsBf16({}));  // nothing to carry
  // The bytes: 2 a value, little-endian, read back as the rounded floats.
  const std::vector<float> x = {1.0f, -2.5f, 3.14159f, 0.0f};
  const std::string bytes = Bf16Bytes(x);
  ASSERT_EQ(bytes.size(), 8u);
  EXPECT_EQ(bytes.substr(0, 2), std::string("\x80\x3f", 2));  // 1.0 is 0x3F80
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(Bf16ValueAt(bytes, i), Bf16ToFloat(FloatToBf16(x[i])));
  EXPECT_TRUE(HoldsExactlyAsBf16(std::vector<float>{0.0f, -2.0f, 1.5f}));
}

}  // namespace
}  // namespace sketchfuse
