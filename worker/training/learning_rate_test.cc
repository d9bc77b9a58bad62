// The learning rate's schedule (LearningRateAt): none by default, linear
// scaling with W after a linear warm-up, and the optimizer takes the rate.
#include <cmath>

#include "gtest/gtest.h"
#include "worker/training/learning_rate.h"
#include "worker/training/classifier_workload.h"

namespace sketchfuse {
namespace {

TEST(LearningRateTest, WithoutABaseTheRateIsTheRunsAtEveryStepAndW) {
  v1::RunConfig run;
  run.set_learning_rate(0.05);
  for (uint32_t world : {1u, 4u, 256u}) {
    for (int64_t step : {0, 7, 100000}) EXPECT_EQ(LearningRateAt(run, world, step), 0.05);
  }
}

TEST(LearningRateTest, ScalesLinearlyWithTheWorkersAfterTheWarmUp) {
  v1::RunConfig run;
  run.set_learning_rate(0.05);
  run.set_lr_base_workers(4);
  run.set_lr_warmup_steps(10);
  // 64 workers: 16 times the rate at 4, reached linearly over 10 steps.
  EXPECT_DOUBLE_EQ(LearningRateAt(run, 64, 0), 0.05);
  EXPECT_DOUBLE_EQ(LearningRateAt(run, 64, 5), 0.05 + (0.8 - 0.05) / 2);
  EXPECT_DOUBLE_EQ(LearningRateAt(run, 64, 10), 0.8);
  EXPECT_DOUBLE_EQ(LearningRateAt(run, 64, 1000), 0.8);
  // At the base, no change; below it, a smaller rate.
  EXPECT_DOUBLE_EQ(LearningRateAt(run, 4, 3), 0.05);
  EXPECT_DOUBLE_EQ(LearningRateAt(run, 2, 10), 0.025);
  // No warm-up: scaled from the first step.
  run.set_lr_warmup_steps(0);
  EXPECT_DOUBLE_EQ(LearningRateAt(run, 16, 0), 0.2);
}

// A run that keeps its residuals in units of the rate rescales them by the
// ratio of this step's rate to the next's: only across a change, and never
// when the run keeps raw gradients.
TEST(LearningRateTest, TheResidualFollowsTheRateOnlyWhenTheRunSaysSo) {
  v1::RunConfig run;
  run.set_learning_rate(0.05);
  run.set_lr_base_workers(4);
  run.set_lr_warmup_steps(10);
  for (int64_t step : {0, 5, 9, 10, 50}) EXPECT_EQ(ResidualRescaleAfter(run, 64, step), 1.0f) << step;
  run.set_residual_in_rate_units(true);
  // 64 workers: 0.05 rising by 0.075 a step to 0.8 at step 10.
  EXPECT_FLOAT_EQ(ResidualRescaleAfter(run, 64, 0), static_cast<float>(0.05 / 0.125));
  EXPECT_FLOAT_EQ(ResidualRescaleAfter(run, 64, 9), static_cast<float>(0.725 / 0.8));
  EXPECT_EQ(ResidualRescaleAfter(run, 64, 10), 1.0f) << "the rate has stopped rising";
  EXPECT_EQ(ResidualRescaleAfter(run, 64, 1000), 1.0f);
  EXPECT_EQ(ResidualRescaleAfter(run, 4, 3), 1.0f) << "at the base the rate never changes";
  run.set_lr_base_workers(0);
  run.set_lr_warmup_steps(0);
  EXPECT_EQ(ResidualRescaleAfter(run, 64, 3), 1.0f) << "no schedule";
}

TEST(LearningRateTest, TheOptimizerTakesTheRate) {
  torch::Tensor p = torch::ones({3}, torch::requires_grad());
  torch::optim::SGD optimizer({p}, torch::optim::SGDOptions(0.05));
  SetLearningRate(optimizer, 0.5);
  p.mutable_grad() = torch::ones({3});
  optimizer.step();
  EXPECT_FLOAT_EQ(p[0].item<float>(), 0.5f);
}

}  // namespace
}  // namespace sketchfuse
