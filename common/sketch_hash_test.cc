// Tests of the Count-Sketch hash family: range, uniformity (chi-square),
// pairwise behaviour of signs, and that seeds and rows give distinct hashes.
#include "common/sketch_hash.h"

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

// Chi-square statistic of bucket counts against the uniform distribution.
double ChiSquare(const std::vector<uint64_t>& counts, double expected) {
  double chi2 = 0;
  for (uint64_t c : counts) chi2 += (c - expected) * (c - expected) / expected;
  return chi2;
}

struct UniformityCase {
  uint32_t cols;
  uint64_t seed;
  uint32_t row;
};

class BucketUniformityTest : public ::testing::TestWithParam<UniformityCase> {};

TEST_P(BucketUniformityTest, ChiSquareWithinFiveSigma) {
  const UniformityCase c = GetParam();
  const uint32_t n = c.cols * 64;  // 64 expected per bucket
  std::vector<uint64_t> counts(c.cols, 0);
  const RowHash h = MakeRowHash(c.seed, c.row);
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t b = BucketOf(HashBits(h, i), c.cols);
    ASSERT_LT(b, c.cols);
    ++counts[b];
  }
  // Chi-square with cols-1 degrees of freedom: mean cols-1, sd sqrt(2(cols-1)).
  const double dof = c.cols - 1;
  const double chi2 = ChiSquare(counts, 64.0);
  EXPECT_LT(std::abs(chi2 - dof), 5 * std::sqrt(2 * dof))
      << "cols=" << c.cols << " seed=" << c.seed << " row=" << c.row;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, BucketUniformityTest,
    ::testing::Values(UniformityCase{2, 1, 0}, UniformityCase{7, 1, 1},
                      UniformityCase{1000, 42, 0}, UniformityCase{1000, 42, 4},
                      UniformityCase{4099, 7, 2}, UniformityCase{65536, 3, 1}));

TEST(SketchHashTest, BucketStaysInRangeAtLimits) {
  const RowHash h = MakeRowHash(9, 0);
  for (uint32_t cols : {1u, 2u, 3u, kMaxSketchCols - 1, kMaxSketchCols}) {
    for (uint32_t i : {0u, 1u, 12345u, 0xFFFFFFFEu, 0xFFFFFFFFu}) {
      EXPECT_LT(BucketOf(HashBits(h, i), cols), cols);
    }
  }
  EXPECT_EQ(BucketOf(0x7FFFFFFFu, 10), 9u);
  EXPECT_EQ(BucketOf(0x80000000u, 10), 0u);
  EXPECT_EQ(SignOf(0x80000000u), -1.0f);
  EXPECT_EQ(SignOf(0x7FFFFFFFu), 1.0f);
}

TEST(SketchHashTest, SignsAreBalancedAndPairwiseUncorrelated) {
  const RowHash h = MakeRowHash(123, 3);
  const uint32_t n = 1 << 20;
  double sum = 0, lag1 = 0, lag_far = 0;
  float prev = SignOf(HashBits(h, 0));
  sum += prev;
  for (uint32_t i = 1; i < n; ++i) {
    const float s = SignOf(HashBits(h, i));
    sum += s;
    lag1 += s * prev;
    lag_far += s * SignOf(HashBits(h, i ^ 0x5555u));
    prev = s;
  }
  // Each sum has standard deviation sqrt(n) = 1024 for independent signs.
  EXPECT_LT(std::abs(sum), 5 * 1024.0);
  EXPECT_LT(std::abs(lag1), 5 * 1024.0);
  EXPECT_LT(std::abs(lag_far), 5 * 1024.0);
}

TEST(SketchHashTest, BucketAndSignAreIndependent) {
  // Within each bucket, signs must be balanced: a joint chi-square over
  // (bucket, sign) cells.
  const uint32_t cols = 256;
  const RowHash h = MakeRowHash(77, 1);
  std::vector<uint64_t> counts(2 * cols, 0);
  const uint32_t n = 2 * cols * 64;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t bits = HashBits(h, i);
    ++counts[2 * BucketOf(bits, cols) + SignBitOf(bits)];
  }
  const double dof = 2 * cols - 1;
  EXPECT_LT(std::abs(ChiSquare(counts, 64.0) - dof), 5 * std::sqrt(2 * dof));
}

TEST(SketchHashTest, PairsCollideWithProbabilityOneOverColsAcrossSeeds) {
  // The family's guarantee is over the seed: for a fixed pair of coordinates,
  // Pr[bucket(i) == bucket(j)] = 1/cols and Pr[sign(i) == sign(j)] = 1/2.
  const uint32_t cols = 64;
  const int seeds = 64000;
  for (auto [i, j] : {std::pair<uint32_t, uint32_t>{0, 1}, {5, 6}, {100, 100 + 1024}}) {
    int bucket_collisions = 0, same_sign = 0;
    for (int s = 0; s < seeds; ++s) {
      const RowHash h = MakeRowHash(s, 0);
      const uint32_t bi = HashBits(h, i), bj = HashBits(h, j);
      bucket_collisions += BucketOf(bi, cols) == BucketOf(bj, cols);
      same_sign += SignBitOf(bi) == SignBitOf(bj);
    }
    // Binomial(64000, 1/64): mean 1000, sd 31; Binomial(64000, 1/2): sd 126.
    EXPECT_NEAR(bucket_collisions, 1000, 5 * 31) << i << "," << j;
    EXPECT_NEAR(same_sign, 32000, 5 * 126) << i << "," << j;
  }
}

TEST(SketchHashTest, RowsAndSeedsGiveDifferentFunctions) {
  const uint32_t cols = 1 << 16;
  auto agreement = [cols](RowHash x, RowHash y) {
    int same = 0;
    for (uint32_t i = 0; i < 10000; ++i) {
      same += BucketOf(HashBits(x, i), cols) == BucketOf(HashBits(y, i), cols);
    }
    return same;
  };
  // Two independent functions agree on about 10000 / 65536 < 1 index.
  EXPECT_LT(agreement(MakeRowHash(1, 0), MakeRowHash(1, 1)), 10);
  EXPECT_LT(agreement(MakeRowHash(1, 0), MakeRowHash(2, 0)), 10);
  EXPECT_EQ(agreement(MakeRowHash(5, 2), MakeRowHash(5, 2)), 10000);
}

TEST(SketchHashTest, DefinitionIsPinned) {
  // The family is part of the wire format: sketches from different builds
  // (CPU, GPU, older releases) must agree. These values pin it.
  const RowHash h = MakeRowHash(0, 0);
  EXPECT_EQ(h.a, SplitMix64(0, 0));
  EXPECT_EQ(SplitMix64(0, 0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(Fmix32(0), 0u);
  EXPECT_EQ(Fmix32(1), 0x514E28B7u);  // MurmurHash3 fmix32(1)
  // HashBits is the 64-bit multiply-add-shift of the definition.
  for (uint64_t seed = 0; seed < 100; ++seed) {
    const RowHash g = MakeRowHash(seed, seed % 7);
    for (uint32_t i : {0u, 1u, 2u, 77u, 65535u, 123456789u, 0xFFFFFFFEu, 0xFFFFFFFFu}) {
      EXPECT_EQ(HashBits(g, i), static_cast<uint32_t>((g.a * Fmix32(i) + g.b) >> 32));
    }
  }
}

}  // namespace
}  // namespace sketchfuse
