// The learning rate's schedule (LearningRateAt): none by default, linear
// scaling with W after a linear warm-up, and the optimizer takes the rate.
#include <cmath>

#include "gtest/gtest.h"
#include "worker/training/learning_rate.h"
#include "torch/optim/sgd.h"
#include "worker/training/optimizer.h"

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

// The cosine schedule: a warm-up from peak / warmup to the peak, then a half
// cosine to the final fraction at the last step; the peak scaled with W.
TEST(LearningRateTest, TheCosineScheduleWarmsUpThenFollowsAHalfCosineToTheLastStep) {
  v1::RunConfig run;
  run.set_learning_rate(2e-3);
  run.set_lr_schedule(kCosineSchedule);
  run.set_lr_warmup_steps(30);
  run.set_lr_final_fraction(0.1);
  run.set_steps_per_epoch(100);
  run.set_epochs(3);  // steps 0..299
  EXPECT_DOUBLE_EQ(LearningRateAt(run, 4, 0), 2e-3 / 30);
  EXPECT_DOUBLE_EQ(LearningRateAt(run, 4, 14), 2e-3 * 15 / 30);
  EXPECT_DOUBLE_EQ(LearningRateAt(run, 4, 29), 2e-3);
  EXPECT_DOUBLE_EQ(LearningRateAt(run, 4, 30), 2e-3) << "the cosine starts at the peak";
  // Halfway through the decay (step 30 + 269 / 2): the mean of peak and floor.
  const double mid = LearningRateAt(run, 4, 30) * 0.5 * (1 + 0.1);
  EXPECT_NEAR(LearningRateAt(run, 4, 30 + 269 / 2), mid, 2e-3 * 0.01);
  EXPECT_DOUBLE_EQ(LearningRateAt(run, 4, 299), 2e-4) << "the last step: the final fraction";
  EXPECT_DOUBLE_EQ(LearningRateAt(run, 4, 5000), 2e-4) << "past the end it stays there";
  for (int64_t step = 31; step < 300; ++step) {
    EXPECT_LT(LearningRateAt(run, 4, step), LearningRateAt(run, 4, step - 1)) << step;
  }
  // With a base, the peak scales with the workers.
  run.set_lr_base_workers(4);
  EXPECT_DOUBLE_EQ(LearningRateAt(run, 16, 29), 8e-3);
  EXPECT_DOUBLE_EQ(LearningRateAt(run, 16, 299), 8e-4);
  // No warm-up: the peak at step 0; a run no longer than its warm-up stays
  // at the peak after it.
  run.set_lr_warmup_steps(0);
  EXPECT_DOUBLE_EQ(LearningRateAt(run, 4, 0), 2e-3);
  run.set_lr_warmup_steps(400);
  EXPECT_DOUBLE_EQ(LearningRateAt(run, 4, 399), 2e-3);
  EXPECT_DOUBLE_EQ(LearningRateAt(run, 4, 450), 2e-3);
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
