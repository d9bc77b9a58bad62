#include "worker/step_stats.h"

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

absl::Time At(double ms) { return absl::UnixEpoch() + absl::Milliseconds(ms); }

TEST(PhasesOfTest, ClassesSpansByNameAndSumsOverGroups) {
  StepTimeline timeline;
  timeline.begin = At(0);
  timeline.backward_end = At(50);
  timeline.groups = {
      {{"compress", At(10), At(12)}, {"communicate", At(12), At(20)}, {"decode", At(20), At(21)}},
      {},  // a failed group adds nothing
      {{"compress", At(50), At(53)}, {"push, server sum and decode", At(53), At(70)},
       {"second round: exact values", At(70), At(74)}},
  };
  const StepPhases phases = PhasesOf(timeline);
  EXPECT_NEAR(phases.backward, 0.050, 1e-12);
  EXPECT_NEAR(phases.compress, 0.005, 1e-12);
  EXPECT_NEAR(phases.communicate, 0.008 + 0.017 + 0.004, 1e-12);
  EXPECT_NEAR(phases.decode, 0.001, 1e-12);
}

TEST(PhasesOfTest, ReversedTimesCountAsZero) {
  StepTimeline timeline;
  timeline.begin = At(10);
  timeline.backward_end = At(5);
  timeline.groups = {{{"compress", At(3), At(1)}}};
  const StepPhases phases = PhasesOf(timeline);
  EXPECT_EQ(phases.backward, 0);
  EXPECT_EQ(phases.compress, 0);
}

TEST(StepStatsTest, SteadyStateLeavesOutTheFirstStep) {
  StepStats stats(absl::Now());
  const double seconds[] = {9.0, 0.3, 0.1, 0.2, 0.4};
  for (int i = 0; i < 5; ++i) {
    StepPhases phases;
    phases.backward = i == 0 ? 5.0 : 0.05;
    phases.compress = i == 0 ? 5.0 : 0.01 * i;
    const StepReport report = stats.Add(i, seconds[i], 0, StepTraffic{}, phases);
    EXPECT_EQ(report.phases.compress, phases.compress);
  }
  TrainingSummary summary;
  stats.Summarize(5, &summary);
  EXPECT_EQ(summary.steady_steps, 4);
  EXPECT_NEAR(summary.median_step_seconds, 0.25, 1e-12);  // of 0.1 0.2 0.3 0.4
  EXPECT_NEAR(summary.mean_phases.backward, 0.05, 1e-12);
  EXPECT_NEAR(summary.mean_phases.compress, (0.01 + 0.02 + 0.03 + 0.04) / 4, 1e-12);
  EXPECT_NEAR(summary.mean_step_seconds, 10.0 / 5, 1e-12);  // the mean keeps every step
}

TEST(StepStatsTest, OneStepIsItsOwnSteadyState) {
  StepStats stats(absl::Now());
  stats.Add(0, 0.7, 0, StepTraffic{}, StepPhases{0.1, 0.2, 0.3, 0.4});
  TrainingSummary summary;
  stats.Summarize(1, &summary);
  EXPECT_EQ(summary.steady_steps, 1);
  EXPECT_EQ(summary.median_step_seconds, 0.7);
  EXPECT_EQ(summary.mean_phases.decode, 0.4);
}

TEST(StepStatsTest, NoStepsNoSteadyState) {
  StepStats stats(absl::Now());
  TrainingSummary summary;
  stats.Summarize(0, &summary);
  EXPECT_EQ(summary.steady_steps, 0);
  EXPECT_EQ(summary.median_step_seconds, 0);
}

}  // namespace
}  // namespace sketchfuse
