// Real training on a worker: a LibTorch classifier on its shard of
// Fashion-MNIST, whose gradients go through the step pipeline (fusion,
// compression, aggregation) as autograd produces them, and whose optimizer
// (SGD with momentum) applies the aggregated update averaged over the
// workers. Test accuracy is evaluated at the end of each epoch.
//
// Determinism: the model's initial parameters, each worker's data shard and
// its per-epoch order follow from (run.seed, rank, epoch) only, so a worker
// that resumes from its checkpoint recomputes exactly what it lost.
//
// Checkpoints (every `checkpoint_every` steps, and at the end) hold the
// parameters, the optimizer state, the scheme's residuals and the next step,
// written to a temporary file and renamed over the previous one.
#ifndef SKETCHFUSE_WORKER_TRAINER_H_
#define SKETCHFUSE_WORKER_TRAINER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/coordinator.pb.h"
#include "worker/aggregation_scheme.h"
#include "worker/fashion_mnist.h"
#include "worker/models.h"
#include "worker/step_pipeline.h"
#include "worker/step_stats.h"
#include "worker/trace_writer.h"

namespace sketchfuse {

struct TrainerConfig {
  // What the coordinator handed out: rank, world size, the job and its run.
  v1::JoinReply joined;
  std::string data_dir = kFashionMnistDir;
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
};

class Trainer {
 public:
  // Loads the data and builds the model; restores the checkpoint if one
  // exists at config.checkpoint_path (INVALID_ARGUMENT if it belongs to
  // another run, DATA_LOSS if it cannot be read).
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(TrainerConfig config, AggregationScheme* scheme);
  ~Trainer();

  // Trains the run's epochs; `progress` gets every report.
  absl::StatusOr<TrainingSummary> Run(const std::function<void(const Progress&)>& progress);

  // Parameters flattened in forward order (for tests comparing runs).
  std::vector<float> FlatParameters() const;
  const StepPipeline& pipeline() const { return *pipeline_; }

 private:
  struct State;
  explicit Trainer(std::unique_ptr<State> state);
  absl::Status TrainStep(int64_t step, const torch::Tensor& images, const torch::Tensor& labels,
                         double* loss);
  // Adds the step's timeline to the trace (within the traced steps).
  void TraceStep(int64_t step);
  absl::Status SaveCheckpoint(int64_t next_step) const;
  absl::StatusOr<int64_t> LoadCheckpoint();

  std::unique_ptr<State> state_;
  std::unique_ptr<StepPipeline> pipeline_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_TRAINER_H_
