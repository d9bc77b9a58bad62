// WorkerMetrics against what a scrape would read: the peel's recovery share
// and its alarm (sketchfuse_worker_peel_recovery_low) follow the progress
// reports, and a run without a peel shows no alarm.
#include "worker/training/worker_metrics.h"

#include <optional>
#include <string>

#include "gtest/gtest.h"
#include "prometheus/registry.h"

namespace sketchfuse {
namespace {

// The value of the unlabelled gauge `name`, or nothing when it has no series.
std::optional<double> GaugeValue(prometheus::Registry& registry, const std::string& name) {
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    if (family.name != name) continue;
    if (family.metric.empty()) return std::nullopt;
    return family.metric.front().gauge.value;
  }
  return std::nullopt;
}

Progress WithShare(double share) {
  Progress progress;
  progress.step = 10;
  progress.peel_recovered_share = share;
  return progress;
}

TEST(WorkerMetricsTest, ThePeelAlarmIsRaisedUnderNinetyPercentAndCleared) {
  prometheus::Registry registry;
  WorkerMetrics metrics(registry);
  metrics.OnProgress(WithShare(0.62));
  EXPECT_EQ(GaugeValue(registry, "sketchfuse_worker_peel_recovered_share"), 0.62);
  EXPECT_EQ(GaugeValue(registry, "sketchfuse_worker_peel_recovery_low"), 1.0);
  metrics.OnProgress(WithShare(kPeelRecoveryWarning));
  EXPECT_EQ(GaugeValue(registry, "sketchfuse_worker_peel_recovery_low"), 0.0);
  metrics.OnProgress(WithShare(0.8999));
  EXPECT_EQ(GaugeValue(registry, "sketchfuse_worker_peel_recovery_low"), 1.0);
  metrics.OnProgress(WithShare(0.999));
  EXPECT_EQ(GaugeValue(registry, "sketchfuse_worker_peel_recovery_low"), 0.0);
  EXPECT_EQ(GaugeValue(registry, "sketchfuse_worker_peel_recovered_share"), 0.999);
  // A report without a share (-1) leaves both where they were.
  metrics.OnProgress(WithShare(-1));
  EXPECT_EQ(GaugeValue(registry, "sketchfuse_worker_peel_recovery_low"), 0.0);
  EXPECT_EQ(GaugeValue(registry, "sketchfuse_worker_peel_recovered_share"), 0.999);
}

TEST(WorkerMetricsTest, ARunWithoutAPeelHasNoPeelAlarm) {
  prometheus::Registry registry;
  WorkerMetrics metrics(registry);
  Progress progress;
  progress.step = 5;
  progress.train_loss = 1.25;
  metrics.OnProgress(progress);
  EXPECT_EQ(GaugeValue(registry, "sketchfuse_worker_peel_recovery_low"), std::nullopt);
  EXPECT_EQ(GaugeValue(registry, "sketchfuse_worker_train_loss"), 1.25);
}

}  // namespace
}  // namespace sketchfuse
