// The learning rate's schedule (LearningRateAt): none by default, linear
// scaling with W after a linear warm-up, and the optimizer takes the rate.
#include <cmath>

#include "gtest/gtest.h"
#include "worker/training/trainer.h"

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
