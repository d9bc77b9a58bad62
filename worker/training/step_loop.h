// The one training step loop: a worker process (one participant), a job of
// W virtual workers in one process (W participants over one model), and a
// synthetic profile (a participant without a model) all train through
// RunStepLoop, so the epoch order, the loss check, the backward pass, the
// exchange, the finite check, the update's application, the residuals'
// settlement, divergence, the curve, the reports and the evaluations are
// written once. What differs is the Workload (what is trained) and the
// participants (whose pipelines exchange the gradients).
//
// A step, for each participant p in order: BeginStep, the workload's
// Forward of p's batch (the participant's epoch order, EpochOrder(seed,
// rank, epoch)), the loss checked against the workload's bound (CheckLoss)
// before any gradient moves, Backward (the gradients reach p's pipeline),
// MarkBackwardEnd. Then every participant's FinishStep (with several
// participants each on a thread of its own, since a scheme's exchange may
// meet the others'; the first that fails stops the rest at once), every
// participant must hold the same updates (INTERNAL otherwise: the route
// broke its contract), the updates must be finite, the workload applies
// them once at the run's rate (LearningRateAt), and every pipeline settles
// its residuals (Applied, rescaled by ResidualRescaleAfter).
//
// After a step: the stats (bytes per worker: the participants' mean; phases:
// participant 0's), on_step, the curve point every eval_every steps and
// after the last one (the workload's evaluation on its curve subset),
// after_step (a checkpoint), and a progress report every report_every steps
// and at each epoch's end (with the test set's evaluation there).
//
// A step that fails is a divergence when divergence_of finds one in its
// status (the run then ends with the steps done and summary.diverged set);
// any other failure is the loop's error, "step N: ...".
#ifndef SKETCHFUSE_WORKER_TRAINING_STEP_LOOP_H_
#define SKETCHFUSE_WORKER_TRAINING_STEP_LOOP_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/payload.h"
#include "proto/job_config.pb.h"
#include "worker/core/divergence.h"
#include "worker/pipeline/fusion_layout.h"
#include "worker/pipeline/step_pipeline.h"
#include "worker/pipeline/step_stats.h"
#include "worker/schemes/aggregation_scheme.h"
#include "worker/training/evaluation.h"

namespace sketchfuse {

// What a step loop trains. One model (or none) for every participant: in
// synchronous data parallelism the participants' replicas are equal.
class Workload {
 public:
  virtual ~Workload() = default;

  // Examples in participant p's shard of the training data (its epoch order
  // permutes them); 0 for a workload without data (a synthetic profile).
  virtual int64_t examples(uint32_t participant) const = 0;

  // The classes a loss is checked against (CheckLoss: non-finite, or past
  // kBlownUpLossFactor times a uniform guess's ln C); 0: no loss to check.
  virtual int loss_classes() const = 0;

  // Participant p's forward pass of `step` on the examples `batch` (indices
  // into its shard; empty without data): the loss, kept for Backward.
  virtual absl::StatusOr<double> Forward(uint32_t participant, int64_t step, absl::Span<const int64_t> batch) = 0;

  // Its backward pass: every gradient reaches `pipeline` (through autograd's
  // hooks, or fed). An error fails the step.
  virtual absl::Status Backward(uint32_t participant, int64_t step, StepPipeline& pipeline) = 0;

  // Applies the step's aggregated updates (one per group of `layout`, each
  // the sum over `world` workers) once, at `rate`. Nothing applied on an
  // error.
  virtual absl::Status Apply(const std::vector<Update>& updates, const FusionLayout& layout, uint32_t world,
                             double rate) = 0;

  // Test accuracy and loss on the curve's fixed subset of the test set, or
  // on the whole test set; nullopt for a workload without one.
  virtual std::optional<Evaluation> Evaluate(bool whole_test_set) = 0;

  // True when the run is judged by its test loss (a language model's
  // validation loss), false by its test accuracy (a classifier's): the
  // summary's quality_metric.
  virtual bool judged_by_loss() const { return false; }
};

// Who trains: each participant's pipeline and scheme (not owned), and its
// rank in the job (its data shard and epoch order).
struct Participants {
  std::vector<StepPipeline*> pipelines;
  std::vector<AggregationScheme*> schemes;
  std::vector<uint32_t> ranks;
};

struct StepLoopConfig {
  v1::RunConfig run;
  // The job's workers (the mean update divides by it; the rate scales by it).
  uint32_t world = 1;
  // The first step to run (a checkpoint's next step); the summary's
  // resumed_from_step.
  int64_t first_step = 0;
  // The curve every this many steps and after the last (0: none), and a
  // progress report every this many steps (0: at the end of epochs only).
  int eval_every = 0;
  int report_every = 0;
  // With several participants, the longest a participant's FinishStep
  // waits; with one, the pipeline's own limit (StepPipeline::FinishStep).
  absl::Duration collective_timeout = absl::Minutes(5);
  // The run's warnings, before the end of run's (AddEndOfRunWarnings).
  std::vector<std::string> warnings;

  // Participant p's failure `why`, as the run should see it (e.g. naming
  // the worker, after stopping the other participants' exchanges). Empty:
  // as it is.
  std::function<absl::Status(uint32_t participant, const absl::Status& why)> on_failure;
  // The divergence behind a failed step, if any (DivergenceOf when empty).
  std::function<std::optional<Divergence>(const absl::Status& failure)> divergence_of;
  // After each step's stats, with the apply's start and end (a timeline).
  std::function<void(int64_t step, const StepReport& report, absl::Time apply_begin, absl::Time apply_end)> on_step;
  // After each step's curve point (a checkpoint); an error ends the run.
  std::function<absl::Status(int64_t step)> after_step;
  // After the last step, before the summary (a checkpoint, the timeline);
  // after a divergence, at_divergence instead (best effort).
  std::function<absl::Status(int64_t total_steps)> at_end;
  std::function<void()> at_divergence;
};

// Trains config.run's epochs from config.first_step; `progress` gets every
// report. A divergence is not an error: summary.diverged says where.
absl::StatusOr<TrainingSummary> RunStepLoop(Workload& workload, const Participants& participants,
                                            const StepLoopConfig& config,
                                            const std::function<void(const Progress&)>& progress);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_TRAINING_STEP_LOOP_H_
