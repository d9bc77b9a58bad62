// Count-Sketch: the blocked, vectorized paths against the one-coordinate
// reference (bit-exact), linearity, the Count-Sketch error bound, heavy-hitter
// recovery on planted vectors, and shape validation.
#include "common/count_sketch.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

#include "common/sketch_hash.h"
#include "common/sketch_kernels.h"
#include "common/topk.h"
#include "common/test_vectors.h"
#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

CountSketch MustCreate(const SketchShape& shape) {
  absl::StatusOr<CountSketch> s = CountSketch::Create(shape);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

struct ShapeCase {
  size_t n;
  uint32_t rows;
  uint32_t cols;
};

// Each case runs twice: with the AVX2 kernels (where the CPU has them) and
// with the portable loops.
class CountSketchParityTest : public ::testing::TestWithParam<std::tuple<ShapeCase, bool>> {
 protected:
  void SetUp() override { sketch_kernels::SetSimdAllowed(std::get<1>(GetParam())); }
  void TearDown() override { sketch_kernels::SetSimdAllowed(true); }
};

TEST_P(CountSketchParityTest, InsertAndEstimateMatchReferenceBitForBit) {
  const ShapeCase c = std::get<0>(GetParam());
  const SketchShape shape{c.rows, c.cols, 1234 + c.n};
  const std::vector<float> x = GaussianVector(c.n, static_cast<uint32_t>(c.n + c.rows));
  CountSketch sketch = MustCreate(shape);
  ASSERT_TRUE(sketch.Insert(x).ok());
  std::vector<float> reference(shape.num_cells(), 0.0f);
  count_sketch_reference::Insert(shape, x, &reference);
  // Same additions in the same order per cell: identical floats.
  ASSERT_EQ(sketch.table(), reference);

  std::vector<float> estimates(c.n);
  sketch.view().EstimateAll(absl::MakeSpan(estimates));
  for (size_t i = 0; i < c.n; ++i) {
    const float ref = count_sketch_reference::Estimate(shape, reference, static_cast<uint32_t>(i));
    ASSERT_EQ(estimates[i], ref) << "coordinate " << i;
    ASSERT_EQ(sketch.view().Estimate(static_cast<uint32_t>(i)), ref);
  }

  // Heavy hitters equal the exact top-k of the estimates, with their values.
  const uint64_t k = std::max<size_t>(1, c.n / 50);
  const SparseEntries hh = sketch.view().HeavyHitters(c.n, k);
  EXPECT_EQ(hh.indices, TopKIndicesReference(estimates, k));
  ASSERT_EQ(hh.values.size(), hh.indices.size());
  for (size_t j = 0; j < hh.indices.size(); ++j) {
    EXPECT_EQ(hh.values[j], estimates[hh.indices[j]]);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CountSketchParityTest,
    ::testing::Combine(
        ::testing::Values(ShapeCase{0, 5, 10}, ShapeCase{1, 5, 10}, ShapeCase{1, 1, 1},
                          ShapeCase{7, 5, 3}, ShapeCase{2047, 5, 100}, ShapeCase{2049, 3, 64},
                          ShapeCase{10000, 1, 500}, ShapeCase{10000, 4, 500},
                          ShapeCase{33333, 5, 1000}, ShapeCase{50000, 7, 2000},
                          ShapeCase{100003, 5, 20000}, ShapeCase{70000, 2, 3000},
                          ShapeCase{20000, 5, (1u << 22)}, ShapeCase{5000, 2, 1},
                          ShapeCase{10000, 3, 1500}, ShapeCase{4096, 5, 31}),
        ::testing::Bool()));

// HeavyHitters (sampled threshold, blocked pass) must return exactly the
// top-k of EstimateAll's estimates, also on tables built to be hard for it:
// ties, infinities, huge values, NaNs and heavy runs in one row, for every
// row count up to 7 and k from 1 to n.
TEST(CountSketchTest, HeavyHittersAreTheTopKOfTheEstimatesOnHardTables) {
  constexpr uint32_t kCols = 3001;
  constexpr uint32_t n = 40000;
  std::mt19937 rng(77);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> small(-2, 2);
  std::uniform_int_distribution<uint32_t> cell_of(0, kCols - 1);
  enum Fill { kGaussian, kTies, kInfinities, kHuge, kNaNs, kHeavyRun };
  for (uint32_t rows = 1; rows <= 7; ++rows) {
    const SketchShape shape{rows, kCols, 40 + rows};
    for (Fill fill : {kGaussian, kTies, kInfinities, kHuge, kNaNs, kHeavyRun}) {
      std::vector<float> table(shape.num_cells());
      for (float& v : table) {
        switch (fill) {
          case kTies: v = static_cast<float>(small(rng)); break;
          case kHuge: v = 3.0e38f * (normal(rng) > 0 ? 1.0f : -1.0f) * (0.5f + 0.5f * std::abs(normal(rng)) / 4); break;
          default: v = normal(rng);
        }
      }
      if (fill == kInfinities || fill == kNaNs) {
        const float special = fill == kNaNs ? std::nanf("") : std::numeric_limits<float>::infinity();
        for (int j = 0; j < 40; ++j) {
          table[cell_of(rng) + kCols * (j % rows)] = (j % 3 == 0 ? -1.0f : 1.0f) * special;
        }
      }
      if (fill == kHeavyRun) {
        // One row holds a run of huge cells: coordinates large in that row
        // only, which the other rows must outvote.
        for (uint32_t c = 100; c < 1100; ++c) table[c] = 1000.0f;
      }
      absl::StatusOr<CountSketch> sketch = CountSketch::FromTable(shape, table);
      ASSERT_TRUE(sketch.ok());
      std::vector<float> estimates(n);
      sketch->view().EstimateAll(absl::MakeSpan(estimates));
      for (uint64_t k : {uint64_t{1}, uint64_t{40}, uint64_t{800}, uint64_t{20000}, uint64_t{n}}) {
        const SparseEntries hh = sketch->view().HeavyHitters(n, k);
        ASSERT_EQ(hh.indices, TopKIndicesReference(estimates, k))
            << "rows " << rows << ", fill " << fill << ", k " << k;
      }
    }
  }
}

TEST(CountSketchTest, MedianNetworkMatchesSortOnAllOrderings) {
  // Five rows with every permutation of five distinct values at one bucket:
  // the min/max median network must return the middle value.
  const SketchShape shape{5, 1, 0};
  std::vector<float> values = {-2.0f, -1.0f, 0.5f, 3.0f, 4.0f};
  std::sort(values.begin(), values.end());
  do {
    std::vector<float> table(5);
    for (uint32_t r = 0; r < 5; ++r) {
      // Undo the sign so that sign * cell == values[r].
      table[r] = SignOfIndex(MakeRowHash(shape.seed, r), 0) * values[r];
    }
    absl::StatusOr<CountSketch> s = CountSketch::FromTable(shape, table);
    ASSERT_TRUE(s.ok());
    float out[1];
    s->view().EstimateAll(absl::MakeSpan(out, 1));
    EXPECT_EQ(out[0], 0.5f);
  } while (std::next_permutation(values.begin(), values.end()));
}

TEST(CountSketchTest, SketchesAreLinear) {
  const SketchShape shape{5, 4096, 99};
  const std::vector<float> x = GaussianVector(200000, 1), y = GaussianVector(200000, 2);
  std::vector<float> sum(x.size());
  for (size_t i = 0; i < x.size(); ++i) sum[i] = x[i] + y[i];
  CountSketch sx = MustCreate(shape), sy = MustCreate(shape), ss = MustCreate(shape);
  ASSERT_TRUE(sx.Insert(x).ok());
  ASSERT_TRUE(sy.Insert(y).ok());
  ASSERT_TRUE(ss.Insert(sum).ok());
  ASSERT_TRUE(sx.Merge(sy).ok());
  // Each cell sums ~50 terms per input; rounding differs only in the order.
  for (size_t c = 0; c < shape.num_cells(); ++c) {
    EXPECT_NEAR(sx.table()[c], ss.table()[c], 1e-4f * (1 + std::abs(ss.table()[c])));
  }
}

TEST(CountSketchTest, EstimateErrorWithinCountSketchBound) {
  // Count-Sketch guarantee (Charikar et al.): with cols = 3/eps^2, one row's
  // error exceeds eps * ||x||_2 with probability at most 1/3 (Chebyshev), so
  // the median of 5 rows fails with probability at most
  // P[Binomial(5, 1/3) >= 3] = 0.21. For Gaussian data each row's error is
  // close to Normal(0, ||x||^2 / cols), so a row fails with probability
  // P[|Z| > sqrt(3)] = 0.083 and the median with 0.005: both are checked.
  const size_t n = 100000;
  const double eps = 0.05;
  const SketchShape shape{5, static_cast<uint32_t>(3 / (eps * eps)), 7};
  const std::vector<float> x = GaussianVector(n, 3);
  const double norm = std::sqrt(std::inner_product(x.begin(), x.end(), x.begin(), 0.0));
  CountSketch sketch = MustCreate(shape);
  ASSERT_TRUE(sketch.Insert(x).ok());
  std::vector<float> est(n);
  sketch.view().EstimateAll(absl::MakeSpan(est));
  size_t violations = 0;
  for (size_t i = 0; i < n; ++i) violations += std::abs(est[i] - x[i]) > eps * norm;
  EXPECT_LT(violations, 0.21 * n);
  EXPECT_LT(violations, 0.005 * n) << "violations " << violations;
}

TEST(CountSketchTest, RecoversPlantedHeavyHitters) {
  // 1,000,000 Gaussian coordinates plus 500 planted values 50x larger than
  // the noise: a sketch of 5 x 10,000 (100x smaller than the vector) must find
  // every one of them among its top 1000.
  const size_t n = 1000000;
  std::vector<float> x = GaussianVector(n, 11, 0.01f);
  std::mt19937 rng(12);
  std::vector<uint32_t> planted;
  while (planted.size() < 500) {
    const uint32_t i = rng() % n;
    if (std::abs(x[i]) > 0.1f) continue;
    x[i] = (rng() & 1) ? 5.0f : -5.0f;
    planted.push_back(i);
  }
  CountSketch sketch = MustCreate({5, 10000, 2024});
  ASSERT_TRUE(sketch.Insert(x).ok());
  const SparseEntries hh = sketch.view().HeavyHitters(n, 1000);
  size_t found = 0;
  for (uint32_t i : planted) {
    found += std::binary_search(hh.indices.begin(), hh.indices.end(), i);
  }
  EXPECT_EQ(found, planted.size());
  // The planted estimates are close to the truth.
  for (size_t j = 0; j < hh.indices.size(); ++j) {
    if (std::abs(x[hh.indices[j]]) == 5.0f) {
      EXPECT_NEAR(hh.values[j], x[hh.indices[j]], 0.5f);
    }
  }
}

TEST(CountSketchTest, RecoversHeavyHittersThatComeInRuns) {
  // Gradients are heavy in runs (a layer, a bias): 10 runs of 50 consecutive
  // planted values. The chunked layout keeps a run's coordinates on distinct
  // cells of each row and moves them together; every one must still be found.
  const size_t n = 1000000;
  std::vector<float> x = GaussianVector(n, 21, 0.01f);
  std::mt19937 rng(22);
  std::vector<uint32_t> planted;
  for (int run = 0; run < 10; ++run) {
    const uint32_t first = rng() % (n - 50);
    for (uint32_t i = first; i < first + 50; ++i) {
      if (std::abs(x[i]) == 5.0f) continue;  // runs may overlap
      x[i] = (rng() & 1) ? 5.0f : -5.0f;
      planted.push_back(i);
    }
  }
  CountSketch sketch = MustCreate({5, 10000, 2025});
  ASSERT_TRUE(sketch.Insert(x).ok());
  const SparseEntries hh = sketch.view().HeavyHitters(n, 1000);
  for (uint32_t i : planted) {
    EXPECT_TRUE(std::binary_search(hh.indices.begin(), hh.indices.end(), i)) << i;
  }
}

TEST(CountSketchTest, RejectsBadShapesAndMismatchedMerges) {
  EXPECT_EQ(CountSketch::Create({0, 10, 1}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CountSketch::Create({5, 0, 1}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CountSketch::Create({kMaxSketchRows + 1, 10, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CountSketch::Create({5, kMaxSketchCols + 1, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status wrong_size = CountSketch::FromTable({2, 3, 1}, std::vector<float>(5)).status();
  EXPECT_EQ(wrong_size.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong_size.message().find("needs 6"), std::string::npos) << wrong_size;

  CountSketch a = MustCreate({5, 10, 1}), b = MustCreate({5, 10, 2});
  const std::vector<float> before = a.table();
  absl::Status merged = a.Merge(b);
  EXPECT_EQ(merged.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(merged.message().find("seed"), std::string::npos);
  EXPECT_EQ(a.table(), before);
}

}  // namespace
}  // namespace sketchfuse
