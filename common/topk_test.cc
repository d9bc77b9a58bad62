// The fast top-k against the sort-based reference on random data of many
// sizes, distributions and k, including ties, zeros and non-finite values.
#include "common/topk.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

enum class Dist { kGaussian, kHeavyTailed, kFewDistinct, kAllZero };

std::vector<float> MakeData(size_t n, Dist dist, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> x(n);
  std::normal_distribution<float> normal;
  std::student_t_distribution<float> student(2.0f);
  std::uniform_int_distribution<int> small(-3, 3);
  for (float& v : x) {
    switch (dist) {
      case Dist::kGaussian: v = normal(rng); break;
      case Dist::kHeavyTailed: v = student(rng); break;
      case Dist::kFewDistinct: v = static_cast<float>(small(rng)); break;  // many ties
      case Dist::kAllZero: v = (rng() & 1) ? 0.0f : -0.0f; break;
    }
  }
  return x;
}

struct Case {
  size_t n;
  uint64_t k;
  Dist dist;
};

class TopKTest : public ::testing::TestWithParam<Case> {};

TEST_P(TopKTest, MatchesReferenceExactly) {
  const Case c = GetParam();
  const std::vector<float> x = MakeData(c.n, c.dist, static_cast<uint32_t>(c.n * 31 + c.k));
  const std::vector<uint32_t> fast = TopKIndices(x, c.k);
  const std::vector<uint32_t> reference = TopKIndicesReference(x, c.k);
  EXPECT_EQ(fast.size(), std::min<uint64_t>(c.k, c.n));
  EXPECT_EQ(fast, reference);
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, TopKTest,
    ::testing::Values(Case{0, 5, Dist::kGaussian}, Case{1, 1, Dist::kGaussian},
                      Case{1, 0, Dist::kGaussian}, Case{7, 3, Dist::kGaussian},
                      Case{63, 63, Dist::kGaussian}, Case{64, 65, Dist::kGaussian},
                      Case{65, 1, Dist::kHeavyTailed}, Case{1000, 10, Dist::kHeavyTailed},
                      Case{4097, 100, Dist::kFewDistinct}, Case{10007, 1, Dist::kFewDistinct},
                      Case{100000, 100, Dist::kGaussian}, Case{100000, 5000, Dist::kHeavyTailed},
                      Case{262147, 262, Dist::kHeavyTailed}, Case{262147, 262146, Dist::kGaussian},
                      Case{50000, 70, Dist::kAllZero}, Case{1000003, 1000, Dist::kFewDistinct}));

TEST(TopKTest, NonFiniteValuesRankFirst) {
  std::vector<float> x(1000, 1.0f);
  x[10] = std::numeric_limits<float>::quiet_NaN();
  x[20] = -std::numeric_limits<float>::infinity();
  x[30] = 1e30f;
  EXPECT_EQ(TopKIndices(x, 3), (std::vector<uint32_t>{10, 20, 30}));
  EXPECT_EQ(TopKIndices(x, 3), TopKIndicesReference(x, 3));
}

TEST(TopKTest, TiesBreakTowardLowerIndex) {
  std::vector<float> x = {1.0f, -2.0f, 2.0f, 0.5f, -2.0f, 2.0f};
  EXPECT_EQ(TopKIndices(x, 2), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(TopKIndices(x, 3), (std::vector<uint32_t>{1, 2, 4}));
}

TEST(TopKTest, ByKeyMatchesByValue) {
  const std::vector<float> x = MakeData(30000, Dist::kHeavyTailed, 5);
  std::vector<uint32_t> keys(x.size());
  for (size_t i = 0; i < x.size(); ++i) keys[i] = MagnitudeKey(x[i]);
  EXPECT_EQ(TopKIndicesByKey(keys, 123), TopKIndices(x, 123));
}

TEST(TopKTest, ThresholdFallsToZeroAfterRetries) {
  std::vector<uint32_t> sample(1000);
  for (uint32_t i = 0; i < sample.size(); ++i) sample[i] = i + 1;
  EXPECT_GT(topk_internal::ThresholdFromSample(sample, 1000000, 10, 0), 0u);
  EXPECT_EQ(topk_internal::ThresholdFromSample(sample, 1000000, 10, 8), 0u);
}

}  // namespace
}  // namespace sketchfuse
