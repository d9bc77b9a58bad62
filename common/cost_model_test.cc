// FitLinearCost: exact recovery on noiseless data, approximate recovery and
// R^2 under noise, and every rejected input.
#include "common/cost_model.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

TEST(LinearCostTest, Evaluates) {
  const LinearCost cost{2.0, 0.5};
  EXPECT_DOUBLE_EQ(cost(0), 2.0);
  EXPECT_DOUBLE_EQ(cost(4), 4.0);
}

TEST(FitLinearCostTest, RecoversNoiselessLine) {
  const double alpha = 3e-5, beta = 2.5e-9;
  std::vector<double> x, y;
  for (double n : {1e3, 1e4, 1e5, 1e6, 1e7}) {
    x.push_back(n);
    y.push_back(alpha + beta * n);
  }
  absl::StatusOr<LinearFit> fit = FitLinearCost(x, y);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->cost.alpha, alpha, 1e-12 * std::abs(alpha) + 1e-18);
  EXPECT_NEAR(fit->cost.beta, beta, 1e-12 * beta);
  EXPECT_NEAR(fit->r_squared, 1.0, 1e-12);
}

TEST(FitLinearCostTest, TwoSamplesGiveTheLineThroughThem) {
  absl::StatusOr<LinearFit> fit = FitLinearCost({1, 3}, {5, 9});
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_DOUBLE_EQ(fit->cost.alpha, 3.0);
  EXPECT_DOUBLE_EQ(fit->cost.beta, 2.0);
  EXPECT_DOUBLE_EQ(fit->r_squared, 1.0);
}

TEST(FitLinearCostTest, ConstantSecondsFitFlatLine) {
  absl::StatusOr<LinearFit> fit = FitLinearCost({1, 2, 3}, {4, 4, 4});
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_DOUBLE_EQ(fit->cost.alpha, 4.0);
  EXPECT_DOUBLE_EQ(fit->cost.beta, 0.0);
  EXPECT_DOUBLE_EQ(fit->r_squared, 1.0);
}

TEST(FitLinearCostTest, ApproximatesNoisyLine) {
  std::mt19937 rng(11);
  std::normal_distribution<double> noise(0.0, 2e-3);
  std::uniform_real_distribution<double> size(1e4, 1e7);
  const double alpha = 1e-3, beta = 1e-9;
  std::vector<double> x, y;
  for (int i = 0; i < 2000; ++i) {
    x.push_back(size(rng));
    y.push_back(alpha + beta * x.back() + noise(rng));
  }
  absl::StatusOr<LinearFit> fit = FitLinearCost(x, y);
  ASSERT_TRUE(fit.ok()) << fit.status();
  // Standard errors: alpha ~9e-5, beta ~1.6e-11.
  EXPECT_NEAR(fit->cost.alpha, alpha, 4e-4);
  EXPECT_NEAR(fit->cost.beta, beta, 8e-11);
  // Signal variance (beta * range)^2 / 12 ~ 8.3e-6 against noise 4e-6:
  // R^2 ~ 8.3 / 12.3 ~ 0.68.
  EXPECT_NEAR(fit->r_squared, 0.68, 0.05);
}

TEST(FitLinearCostTest, PureNoiseHasLowRSquared) {
  std::mt19937 rng(5);
  std::normal_distribution<double> noise(1.0, 0.1);
  std::vector<double> x, y;
  for (int i = 0; i < 1000; ++i) {
    x.push_back(i);
    y.push_back(noise(rng));
  }
  absl::StatusOr<LinearFit> fit = FitLinearCost(x, y);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_GE(fit->r_squared, 0.0);
  EXPECT_LT(fit->r_squared, 0.02);
}

void ExpectRejected(const std::vector<double>& x, const std::vector<double>& y,
                    const std::string& needle) {
  absl::StatusOr<LinearFit> fit = FitLinearCost(x, y);
  ASSERT_FALSE(fit.ok());
  EXPECT_EQ(fit.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(fit.status().message().find(needle), absl::string_view::npos)
      << fit.status();
}

TEST(FitLinearCostTest, RejectsBadInput) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  ExpectRejected({1, 2, 3}, {1, 2}, "differ in length");
  ExpectRejected({}, {}, "at least 2 samples");
  ExpectRejected({1}, {1}, "at least 2 samples");
  ExpectRejected({2, 2, 2}, {1, 2, 3}, "distinct x");
  ExpectRejected({1, inf}, {1, 2}, "non-finite");
  ExpectRejected({1, 2}, {nan, 2}, "non-finite");
  ExpectRejected({1, 2}, {1, -inf}, "non-finite");
}

}  // namespace
}  // namespace sketchfuse
