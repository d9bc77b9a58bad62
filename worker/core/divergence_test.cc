// The divergence checks and their record: each check names the step, the
// group and the first bad element; the record survives a status and the
// notice's text; DivergenceBehind tells a divergence from another failure.
#include "worker/core/divergence.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(DivergenceTest, AFiniteLossPassesANonFiniteOneIsADivergenceOfTheStep) {
  EXPECT_TRUE(CheckLoss(3, 2.3, 10).ok());
  EXPECT_TRUE(CheckLoss(3, 0.0, 10).ok());
  for (const double loss : {static_cast<double>(kNaN), static_cast<double>(kInf), -static_cast<double>(kInf)}) {
    const absl::Status s = CheckLoss(7, loss, 10);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    const std::optional<Divergence> d = DivergenceOf(s);
    ASSERT_TRUE(d.has_value()) << s;
    EXPECT_EQ(d->step, 7);
    EXPECT_EQ(d->group, -1);
    EXPECT_EQ(d->what, "loss");
    EXPECT_EQ(d->index, -1);
    EXPECT_TRUE(std::isnan(loss) ? std::isnan(d->value) : d->value == loss);
    EXPECT_NE(s.message().find("diverged at step 7: the loss is"), std::string::npos) << s;
    EXPECT_EQ(s.message().find("blown up"), std::string::npos) << "a non-finite loss is not called blown up: " << s;
  }
}

// The bound is 100 ln C: 230.26 nats for ten classes, 69.31 for two. A loss
// at it passes; one past it, finite, is a divergence that says so.
TEST(DivergenceTest, ALossPastAHundredUniformGuessesIsADivergence) {
  EXPECT_NEAR(BlownUpLoss(10), 100 * std::log(10.0), 1e-12);
  EXPECT_NEAR(BlownUpLoss(2), 69.3147, 1e-4);
  EXPECT_TRUE(CheckLoss(0, BlownUpLoss(10), 10).ok());
  EXPECT_TRUE(CheckLoss(0, 230.0, 10).ok());
  EXPECT_TRUE(CheckLoss(0, 70.0, 10).ok());
  EXPECT_FALSE(CheckLoss(0, 70.0, 2).ok()) << "the bound follows the number of classes";
  for (const double loss : {230.3, 1e4, 6.7e13}) {
    const absl::Status s = CheckLoss(12, loss, 10);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    const std::optional<Divergence> d = DivergenceOf(s);
    ASSERT_TRUE(d.has_value()) << s;
    EXPECT_EQ(d->step, 12);
    EXPECT_EQ(d->what, "loss");
    EXPECT_EQ(d->group, -1);
    EXPECT_EQ(d->value, loss);
    EXPECT_NE(s.message().find("diverged at step 12: the loss is"), std::string::npos) << s;
    EXPECT_NE(s.message().find("past 100 times a uniform guess's (the model has blown up)"), std::string::npos) << s;
  }
}

TEST(DivergenceTest, ValuesAreCheckedToTheFirstNonFiniteElement) {
  std::vector<float> values(10000, 1.5f);
  EXPECT_TRUE(CheckFiniteValues("gradient", 4, 2, values).ok());
  values[9000] = -kInf;
  values[6001] = kNaN;
  const absl::Status s = CheckFiniteValues("gradient", 4, 2, values);
  const std::optional<Divergence> d = DivergenceOf(s);
  ASSERT_TRUE(d.has_value()) << s;
  EXPECT_EQ(d->step, 4);
  EXPECT_EQ(d->group, 2);
  EXPECT_EQ(d->what, "gradient");
  EXPECT_EQ(d->index, 6001);
  EXPECT_TRUE(std::isnan(d->value));
  EXPECT_EQ(s.message(), "diverged at step 4: group 2's fused gradient holds a non-finite value (element 6001 = nan)");

  const absl::Status update = CheckFiniteValues("update", 9, 0, {0.0f, kInf});
  ASSERT_TRUE(DivergenceOf(update).has_value());
  EXPECT_EQ(update.message(), "diverged at step 9: group 0's aggregated update holds a non-finite value (element 1 = inf)");
  EXPECT_TRUE(CheckFiniteValues("update", 9, 0, {}).ok());
}

TEST(DivergenceTest, TheRecordSurvivesTheNoticeText) {
  Divergence d;
  d.step = 12;
  d.group = 3;
  d.worker = "worker-1";
  d.what = "update";
  d.index = 77;
  d.value = -kInf;
  const std::optional<Divergence> back = DecodeDivergence(EncodeDivergence(d));
  ASSERT_TRUE(back.has_value()) << EncodeDivergence(d);
  EXPECT_EQ(*back, d);
  EXPECT_EQ(back->Describe(),
            "worker-1 diverged at step 12: group 3's aggregated update holds a non-finite value (element 77 = -inf)");
  // Not records: refused, never half read.
  for (const char* text : {"", "step=1", "step=1;group=2;index=3;what=loss;worker=w;value=nan;extra=1",
                           "step=x;group=2;index=3;what=loss;worker=w;value=nan",
                           "step=1;group=2;index=3;what=weights;worker=w;value=nan",
                           "step=1;group=2;index=3;what=loss;worker=a b;value=nan",
                           "step=-1;group=2;index=3;what=loss;worker=w;value=nan"}) {
    EXPECT_FALSE(DecodeDivergence(text).has_value()) << text;
  }
}

TEST(DivergenceTest, DivergenceBehindTellsADivergenceFromAnotherFailure) {
  const absl::Status own = CheckLoss(5, kNaN, 10);
  const absl::Status lost = absl::UnavailableError("gloo: connection closed by peer");
  Divergence posted;
  posted.step = 5;
  posted.group = 1;
  posted.worker = "worker-3";
  posted.what = "gradient";
  posted.index = 0;
  posted.value = kInf;
  auto none = []() -> std::optional<Divergence> { return std::nullopt; };
  auto announced = [&]() -> std::optional<Divergence> { return posted; };

  // This worker's own: named after it, whatever was posted.
  std::optional<Divergence> d = DivergenceBehind(own, announced, "worker-0");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->worker, "worker-0");
  EXPECT_EQ(d->what, "loss");
  // A failure caused by another worker's divergence: that one.
  d = DivergenceBehind(lost, announced, "worker-0");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(*d, posted);
  // A failure with nothing posted, or no way to ask: not a divergence.
  EXPECT_FALSE(DivergenceBehind(lost, none, "worker-0").has_value());
  EXPECT_FALSE(DivergenceBehind(lost, nullptr, "worker-0").has_value());
  EXPECT_FALSE(DivergenceBehind(absl::OkStatus(), announced, "worker-0").has_value());
}

}  // namespace
}  // namespace sketchfuse
