// Real training on a worker: a LibTorch classifier on its shard of
// Fashion-MNIST (worker/training/classifier_workload.h), whose gradients go
// through the step pipeline (fusion, compression, aggregation) as autograd
// produces them, and whose optimizer (SGD with momentum) applies the
// aggregated update averaged over the workers; one participant of the step
// loop (worker/training/step_loop.h), which the virtual workers and the
// synthetic runner share. Test accuracy is evaluated at the end of each epoch on the test
// set, and every `eval_every` steps on a fixed subset of it (its first
// `eval_examples` examples): the accuracy curve of the summary. Evaluations
// are not counted in step times; they are in the wall time.
//
// Divergence (worker/core/divergence.h): a non-finite or blown-up loss
// (checked before the backward pass), a non-finite fused gradient (the
// pipeline, before encoding) or aggregated update (before it is applied)
// ends the run at that step; Run then returns the summary of the steps done
// with `diverged` set, never an update applied from a NaN. So does a step
// that fails because another worker diverged
// (TrainerConfig::posted_divergence), and a step aborted by Abort.
//
// Determinism: the model's initial parameters, each worker's data shard and
// its per-epoch order follow from (run.seed, rank, epoch) only, so a worker
// that resumes from its checkpoint recomputes exactly what it lost.
//
// Checkpoints (every `checkpoint_every` steps, and at the end) hold the
// parameters, the optimizer state, the scheme's residuals and the next step,
// written to a temporary file and renamed over the previous one.
#ifndef SKETCHFUSE_WORKER_TRAINING_TRAINER_H_
#define SKETCHFUSE_WORKER_TRAINING_TRAINER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/coordinator.pb.h"
#include "worker/schemes/aggregation_scheme.h"
#include "worker/core/divergence.h"
#include "worker/training/torch_workload.h"
#include "worker/training/fashion_mnist.h"
#include "worker/training/learning_rate.h"
#include "worker/training/models.h"
#include "worker/pipeline/step_pipeline.h"
#include "worker/pipeline/step_stats.h"
#include "worker/pipeline/trace_writer.h"

namespace sketchfuse {

struct TrainerConfig {
  // What the coordinator handed out: rank, world size, the job and its run.
  v1::JoinReply joined;
  std::string data_dir = kFashionMnistDir;
  // The language model's text corpus (worker/training/text_corpus.h).
  std::string corpus_dir;
  // Where this worker's checkpoint lives; empty: no checkpoints.
  std::string checkpoint_path;
  int checkpoint_every = 0;
  // A progress report every this many steps (0: only at the end of epochs).
  int report_every = 0;
  // Where to write the per-step timeline (Chrome trace JSON; empty: none),
  // and how many steps it covers from the first one this process runs.
  std::string trace_path;
  int trace_steps = 50;
  // Called after every step (may be empty).
  std::function<void(const StepReport&)> on_step;
  // This worker's id, named in a divergence it reports.
  std::string worker_id;
  // The accuracy curve: test accuracy on the first `eval_examples` test
  // examples (the whole test set if fewer) after every `eval_every` steps and
  // after the last one. Every worker evaluates at the same steps (they hold
  // the same model), so no worker's step waits for another's evaluation.
  // 0: no curve.
  int eval_every = 0;
  int64_t eval_examples = 2000;
  // Asked when a step fails for a reason that is not a divergence of this
  // worker's: the divergence another worker announced, if any (its
  // departure is then why this step failed). May be empty.
  std::function<std::optional<Divergence>()> posted_divergence;
  // Tests only: in this step (>= 0), the first gradient of the backward
  // pass (layer 0) reaches the pipeline with a NaN in its first element, as
  // if this worker's backward pass had overflowed. -1: never.
  int64_t inject_nan_gradient_at_step = -1;
};

class Trainer {
 public:
  // Loads the data and builds the model; restores the checkpoint if one
  // exists at config.checkpoint_path (INVALID_ARGUMENT if it belongs to
  // another run, DATA_LOSS if it cannot be read).
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(TrainerConfig config, AggregationScheme* scheme);
  ~Trainer();

  // Trains the run's epochs; `progress` gets every report. A divergence is
  // not an error: the summary says where it happened (summary.diverged).
  absl::StatusOr<TrainingSummary> Run(const std::function<void(const Progress&)>& progress);

  // Stops the run at its current step with `why` (from any thread): the step
  // in progress fails without waiting for its exchanges
  // (StepPipeline::Abort), and Run returns. A `why` that carries a
  // divergence ends the run as diverged; another ends it with that error.
  void Abort(const absl::Status& why) { pipeline_->Abort(why); }

  // Parameters flattened in forward order (for tests comparing runs).
  std::vector<float> FlatParameters() const;
  const StepPipeline& pipeline() const { return *pipeline_; }

 private:
  struct State;
  explicit Trainer(std::unique_ptr<State> state);
  absl::Status SaveCheckpoint(int64_t next_step) const;
  absl::StatusOr<int64_t> LoadCheckpoint();

  std::unique_ptr<State> state_;
  std::unique_ptr<StepPipeline> pipeline_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_TRAINING_TRAINER_H_
