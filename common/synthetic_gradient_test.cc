#include "common/synthetic_gradient.h"

#include <cmath>

#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

TEST(SyntheticGradientTest, DeterministicHeavyTailedAndInBackwardOrder) {
  const ModelProfile model = ResNet50Profile();
  const std::vector<float> a = SyntheticGradient(model, 1), b = SyntheticGradient(model, 1);
  ASSERT_EQ(a.size(), static_cast<size_t>(model.TotalElements()));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, SyntheticGradient(model, 2));
  // Backward order: the first block of values is the last tensor (fc.bias,
  // 1000 elements), and all values are finite.
  EXPECT_EQ(model.BackwardOrder().front().num_elements, 1000);
  double sum_sq = 0, max_abs = 0;
  for (float v : a) {
    ASSERT_TRUE(std::isfinite(v));
    sum_sq += v * v;
    max_abs = std::max<double>(max_abs, std::abs(v));
  }
  // Heavy tail: the largest entry is far beyond the root-mean-square.
  EXPECT_GT(max_abs, 5 * std::sqrt(sum_sq / a.size()));
}

TEST(SyntheticGradientTest, TimingsFollowTheModel) {
  const ModelProfile model = Vgg16Profile();
  const std::vector<LayerTiming> t = SyntheticLayerTimings(model, 1e-9, 1e-5);
  ASSERT_EQ(t.size(), model.tensors.size());
  EXPECT_EQ(t.front().num_elements, model.tensors.back().num_elements);
  EXPECT_DOUBLE_EQ(t.front().backward_seconds, 1e-5 + 1e-9 * t.front().num_elements);
}

}  // namespace
}  // namespace sketchfuse
