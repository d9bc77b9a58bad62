// What a worker reports while it runs (progress lines, metrics, the JSON
// summary), and the accounting that produces it from each step's figures.
// Shared by the LibTorch trainer and the synthetic-profile runner.
#ifndef SKETCHFUSE_WORKER_PIPELINE_STEP_STATS_H_
#define SKETCHFUSE_WORKER_PIPELINE_STEP_STATS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/json_text.h"
#include "worker/compression/group_state.h"
#include "worker/core/divergence.h"
#include "worker/pipeline/step_pipeline.h"

namespace sketchfuse {

// Where one step's time went, in seconds. `backward` is the backward pass
// (BeginStep to MarkBackwardEnd); the others are summed over the step's
// groups, from the spans of their exchanges (worker/schemes/aggregation_scheme.h),
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
  size_t bytes_received = 0;
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
  double bytes_received_per_step = 0;
  double compression_ratio = 0;  // dense bytes / bytes sent
  double elapsed_seconds = 0;    // since the run started
  double residual_norm = 0;      // L2 norm of the error-feedback residuals, all groups
  // Share of the energy this worker inserted into peeled sketches that the
  // decodes gave back, since the run started (AggregationScheme::
  // peel_recovery); -1 for a run without peeled sketches.
  double peel_recovered_share = -1;
};

// A point of the accuracy curve: test accuracy on the run's fixed evaluation
// subset after `step` steps (--eval_every, --eval_examples).
struct CurvePoint {
  int64_t step = 0;          // steps done (1-based count)
  double elapsed_seconds = 0;  // wall time from the run's start to the end of that step, earlier evaluations included
  double test_accuracy = 0;  // on the evaluation subset
  double test_loss = 0;
  uint64_t bytes_sent = 0;   // by this worker so far (this process's steps)
};

struct TrainingSummary {
  std::vector<Progress> epochs;
  // The accuracy curve, in step order (empty without --eval_every).
  std::vector<CurvePoint> curve;
  int64_t steps = 0;  // steps done: the run's steps, or those before the divergence
  int64_t resumed_from_step = 0;
  // -1 without a test set; NaN when the run diverged (its model is lost).
  double final_test_accuracy = 0;
  double final_test_loss = 0;
  // What the run is judged by: its final test loss (a language model), or
  // its final test accuracy (a classifier).
  bool judged_by_loss = false;
  // Set when the run stopped on a divergence: this worker's, or the one
  // another worker announced (worker/rpc/divergence_notice.h).
  std::optional<Divergence> diverged;
  // Wall time spent evaluating the curve and the epochs: part of
  // wall_seconds and of the curve's elapsed times, never of step times (the
  // final evaluation comes after wall_seconds).
  double eval_seconds = 0;
  double wall_seconds = 0;
  double mean_step_seconds = 0;
  // This worker's traffic per step: what it sent and what it received (the
  // collectives' algorithms, or the pushes and the shards' replies).
  double bytes_sent_per_step = 0;
  double bytes_received_per_step = 0;
  double compression_ratio = 0;
  // Steps aggregated (at least in part) over the workers' collectives.
  int64_t collective_steps = 0;
  // The steady state, for benchmarks: the steps this process ran after its
  // first (which also sets up connections), or the first when it ran one.
  int64_t steady_steps = 0;
  double median_step_seconds = 0;
  StepPhases mean_phases;
  // As Progress::peel_recovered_share, over the whole run.
  double peel_recovered_share = -1;
  // What the worker warned about at join (a compressor that does not fit
  // the job's world size, worker/pipeline/job_plan.h JobFitWarnings) and
  // after the run (a peel that recovered under kPeelRecoveryWarning, a final
  // accuracy no better than guessing: ChanceAccuracyWarning).
  std::vector<std::string> warnings;
};

// A run whose peeled sketches gave back less of the inserted energy than
// this says so in its summary.
inline constexpr double kPeelRecoveryWarning = 0.9;
// The summary's warning for a run whose peels gave back `share` of the
// inserted energy; empty when share >= kPeelRecoveryWarning or no peeled
// sketch was sent (share < 0).
std::string PeelRecoveryWarning(double share);

// A run that ends with a test accuracy of at most this many times chance
// (1/classes) has not learned, whether or not its loss ever passed the
// divergence bound (worker/core/divergence.h): a slow blow-up, or a model
// stuck on a few classes. Its summary says so.
inline constexpr double kChanceAccuracyFactor = 1.1;
// The summary's warning for a final test accuracy `accuracy` (a share) over
// `classes` classes; empty when accuracy > kChanceAccuracyFactor / classes,
// when there is no test set (accuracy < 0), or when the run diverged
// (accuracy NaN: the divergence is reported on its own).
std::string ChanceAccuracyWarning(double accuracy, int64_t classes);

// Appends the warnings a finished run earns from its own figures, in this
// order: PeelRecoveryWarning(summary->peel_recovered_share), then
// ChanceAccuracyWarning(summary->final_test_accuracy, classes). Call it once
// both figures are set; every runner (trainer, virtual workers, synthetic
// profiles) ends through it.
void AddEndOfRunWarnings(int64_t classes, TrainingSummary* summary);

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

  // Seconds since `start`, and the bytes this worker sent in the steps
  // recorded so far.
  double ElapsedSeconds() const;
  uint64_t total_bytes_sent() const { return total_bytes_; }

 private:
  const absl::Time start_;
  double window_loss_ = 0, window_seconds_ = 0;
  size_t window_bytes_ = 0, window_received_ = 0, window_dense_ = 0;
  int64_t window_steps_ = 0;
  double total_seconds_ = 0;
  size_t total_bytes_ = 0, total_received_ = 0, total_dense_ = 0;
  int64_t measured_steps_ = 0, collective_steps_ = 0;
  // Every step's seconds and phases, in order, for the steady state.
  std::vector<double> step_seconds_;
  std::vector<StepPhases> step_phases_;
};

// L2 norm of the residuals in an AggregationScheme::SaveState.
double ResidualNormOf(const std::vector<GroupState>& state);

// Who wrote a summary, and the run it belongs to.
struct SummaryHeader {
  std::string worker;
  uint32_t rank = 0;
  std::string workload, scheme, compressor, fusion;
  // The run's optimizer spec (v1::RunConfig optimizer; empty: sgd).
  std::string optimizer;
  std::string run;  // the run's fingerprint
};

// The worker's JSON summary: one object on one line, valid JSON in every
// case. Strings are escaped; a number that is not finite (a diverged run's
// loss, an accuracy never measured) is written as null. Its fields: the
// header's ("optimizer": "sgd" or the Adam-family spec), the totals (among
// them "bytes_sent_per_step" and "bytes_received_per_step"),
// "quality_metric" ("test_accuracy" for a classifier, "test_loss" for a
// language model), "final_test_accuracy" and "final_test_loss" (null when
// the run diverged, -1 without a test set),
// "diverged" (null, or {"step", "group" (null for the loss), "worker",
// "what", "index", "value", "message"}), "eval_s", "peel_recovered_share"
// (null without peeled sketches), "warnings" (strings), "epochs" and "curve"
// (objects {"step", "elapsed_s", "test_accuracy", "test_loss",
// "bytes_sent"}).
std::string SummaryJson(const SummaryHeader& header, const TrainingSummary& summary);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_PIPELINE_STEP_STATS_H_
