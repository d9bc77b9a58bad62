// What a worker reports while it runs (progress lines, metrics, the JSON
// summary), and the accounting that produces it from each step's figures.
// Shared by the LibTorch trainer and the synthetic-profile runner.
#ifndef SKETCHFUSE_WORKER_STEP_STATS_H_
#define SKETCHFUSE_WORKER_STEP_STATS_H_

#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "worker/step_pipeline.h"

namespace sketchfuse {

// Where one step's time went, in seconds. `backward` is the backward pass
// (BeginStep to MarkBackwardEnd); the others are summed over the step's
// groups, from the spans of their exchanges (worker/aggregation_scheme.h),
// classed by name: "compress", "decode", and everything else communication
// (collectives, pushes with the servers' sum and decode, second rounds).
// Groups overlap the backward pass, so the parts may add up to more than the
// step.
struct StepPhases {
  double backward = 0;
  double compress = 0;
  double communicate = 0;
  double decode = 0;
};

// The phases of a finished step's timeline (a failed group adds nothing).
StepPhases PhasesOf(const StepTimeline& timeline);

// One step's figures, for metrics.
struct StepReport {
  int64_t step = 0;
  double seconds = 0;
  double loss = 0;
  size_t bytes_sent = 0;
  size_t dense_bytes = 0;
  bool collective = false;  // aggregated (at least in part) over the collectives
  StepPhases phases;
};

struct Progress {
  bool end_of_epoch = false;
  int epoch = 0;      // 1-based
  int64_t step = 0;   // global step, 1-based count of steps done
  double train_loss = 0;       // mean over the steps since the last report
  double test_accuracy = -1;   // at the end of an epoch; -1 otherwise (or without a test set)
  double test_loss = -1;
  double step_seconds = 0;     // mean wall time per step since the last report
  double bytes_sent_per_step = 0;
  double compression_ratio = 0;  // dense bytes / bytes sent
  double elapsed_seconds = 0;    // since the run started
  double residual_norm = 0;      // L2 norm of the error-feedback residuals, all groups
};

struct TrainingSummary {
  std::vector<Progress> epochs;
  int64_t steps = 0;
  int64_t resumed_from_step = 0;
  double final_test_accuracy = 0;  // -1 without a test set
  double wall_seconds = 0;
  double mean_step_seconds = 0;
  double bytes_sent_per_step = 0;
  double compression_ratio = 0;
  // Steps aggregated (at least in part) over the workers' collectives.
  int64_t collective_steps = 0;
  // The steady state, for benchmarks: the steps this process ran after its
  // first (which also sets up connections), or the first when it ran one.
  int64_t steady_steps = 0;
  double median_step_seconds = 0;
  StepPhases mean_phases;
};

// Accumulates steps into a window (reset at each report) and into totals.
class StepStats {
 public:
  explicit StepStats(absl::Time start) : start_(start) {}

  // Records a step; returns its report.
  StepReport Add(int64_t step, double seconds, double loss, const StepTraffic& traffic,
                 const StepPhases& phases = {});

  // A report of the window ending after `step` (0-based), which it resets.
  // `residual_norm` is the caller's.
  Progress TakeWindow(int64_t step, int epoch, double residual_norm);

  // The totals, into `summary` (its epochs and accuracy are the caller's).
  void Summarize(int64_t steps, TrainingSummary* summary) const;

 private:
  const absl::Time start_;
  double window_loss_ = 0, window_seconds_ = 0;
  size_t window_bytes_ = 0, window_dense_ = 0;
  int64_t window_steps_ = 0;
  double total_seconds_ = 0;
  size_t total_bytes_ = 0, total_dense_ = 0;
  int64_t measured_steps_ = 0, collective_steps_ = 0;
  // Every step's seconds and phases, in order, for the steady state.
  std::vector<double> step_seconds_;
  std::vector<StepPhases> step_phases_;
};

// L2 norm of the residuals in an AggregationScheme::SaveState (entries
// alternate residual, velocity).
double ResidualNormOf(const std::vector<std::vector<float>>& state);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_STEP_STATS_H_
