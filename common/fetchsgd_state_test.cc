// FetchSGD's sketch-space state against a direct computation of the same
// step on plain vectors of cells, and its refusals.
#include "common/fetchsgd_state.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/sketch_hash.h"
#include "common/test_vectors.h"
#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

Payload SketchOf(const SketchShape& shape, const std::vector<float>& x) {
  Payload p;
  p.kind = PayloadKind::kSketch;
  p.dim = x.size();
  p.sketch = shape;
  p.values.assign(shape.num_cells(), 0.0f);
  count_sketch_reference::Insert(shape, x, &p.values);
  return p;
}

// Three steps against the recurrence written out on cell vectors: momentum,
// accumulation, the heavy hitters of the error sketch, and the cells of the
// applied coordinates zeroed in both sketches.
TEST(FetchSgdStateTest, StepsAsTheRecurrence) {
  const uint64_t dim = 5000, k = 20;
  const SketchShape shape{5, 400, 11};
  FetchSgdState state = *FetchSgdState::Create(shape, dim, k, 0.9f);
  std::vector<float> u(shape.num_cells(), 0.0f), e(shape.num_cells(), 0.0f);
  for (uint32_t step = 0; step < 3; ++step) {
    std::vector<float> g = GaussianVector(dim, 40 + step, 0.1f);
    for (uint32_t i = 0; i < 30; ++i) g[i * 97] += 3.0f;  // persistent heavy coordinates
    const Payload sum = SketchOf(shape, g);
    for (size_t c = 0; c < u.size(); ++c) {
      u[c] = 0.9f * u[c] + sum.values[c];
      e[c] += u[c];
    }
    const SparseEntries expected = SketchView(shape, e.data()).HeavyHitters(dim, k);
    const Update update = *state.Step(sum);
    EXPECT_EQ(update.indices, expected.indices) << "step " << step;
    EXPECT_EQ(update.values, expected.values) << "step " << step;
    for (uint32_t r = 0; r < shape.rows; ++r) {
      const RowHash hash = MakeRowHash(shape.seed, r);
      for (uint32_t i : update.indices) {
        const size_t cell = r * shape.cols + BucketOfIndex(hash, i, shape.cols, ChunkShift(shape.cols));
        u[cell] = e[cell] = 0.0f;
      }
    }
    std::vector<float> want(u);
    want.insert(want.end(), e.begin(), e.end());
    EXPECT_EQ(state.Save(), want) << "step " << step;
  }
}

// Saved state taken back continues exactly as the original.
TEST(FetchSgdStateTest, SaveAndRestoreContinueTheSameRun) {
  const SketchShape shape{3, 200, 2};
  FetchSgdState a = *FetchSgdState::Create(shape, 2000, 10, 0.5f);
  ASSERT_TRUE(a.Step(SketchOf(shape, GaussianVector(2000, 1))).ok());
  FetchSgdState b = *FetchSgdState::Create(shape, 2000, 10, 0.5f);
  ASSERT_TRUE(b.Restore(a.Save()).ok());
  const Payload next = SketchOf(shape, GaussianVector(2000, 2));
  const Update ua = *a.Step(next), ub = *b.Step(next);
  EXPECT_EQ(ua.indices, ub.indices);
  EXPECT_EQ(ua.values, ub.values);
}

TEST(FetchSgdStateTest, RefusesWhatDoesNotFitAndKeepsItsState) {
  const SketchShape shape{3, 200, 2};
  EXPECT_EQ(FetchSgdState::Create(shape, 2000, 10, 1.0f).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FetchSgdState::Create(shape, 2000, 0, 0.9f).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FetchSgdState::Create(SketchShape{0, 200, 2}, 2000, 10, 0.9f).status().code(),
            absl::StatusCode::kInvalidArgument);
  FetchSgdState state = *FetchSgdState::Create(shape, 2000, 10, 0.9f);
  ASSERT_TRUE(state.Step(SketchOf(shape, GaussianVector(2000, 1))).ok());
  const std::vector<float> before = state.Save();
  const absl::Status other_seed = state.Step(SketchOf(SketchShape{3, 200, 3}, GaussianVector(2000, 1))).status();
  EXPECT_EQ(other_seed.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(other_seed.message().find("cannot take"), std::string::npos) << other_seed;
  EXPECT_EQ(state.Step(SketchOf(shape, GaussianVector(1999, 1))).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(state.Restore(std::vector<float>(7, 0.0f)).code(), absl::StatusCode::kInvalidArgument);
  std::vector<float> poisoned = before;
  poisoned[3] = std::nanf("");
  EXPECT_EQ(state.Restore(poisoned).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(state.Save(), before);
}

// Finite sums that would overflow the state (a worker sending cells near
// FLT_MAX each step) are refused, and the state stays finite and as it was.
TEST(FetchSgdStateTest, RefusesASumThatWouldOverflowItsState) {
  const SketchShape shape{3, 200, 2};
  FetchSgdState state = *FetchSgdState::Create(shape, 2000, 10, 0.9f);
  Payload huge = SketchOf(shape, GaussianVector(2000, 1));
  for (float& v : huge.values) v = 3e38f;
  // The first step fits (3e38); a second would take momentum and error past
  // float's range at the cells the decode did not zero.
  ASSERT_TRUE(state.Step(huge).ok());
  const std::vector<float> before = state.Save();
  const absl::Status overflow = state.Step(huge).status();
  EXPECT_EQ(overflow.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(overflow.message().find("past float's range"), std::string::npos) << overflow;
  EXPECT_EQ(state.Save(), before);
  for (float v : state.Save()) ASSERT_TRUE(std::isfinite(v));
  // The state still restores, and still steps on an ordinary sum.
  EXPECT_TRUE(state.Restore(before).ok());
  Payload negative = huge;
  for (float& v : negative.values) v = -3e38f;
  EXPECT_TRUE(state.Step(negative).ok());  // brings the cells back toward 0
}

}  // namespace
}  // namespace sketchfuse
