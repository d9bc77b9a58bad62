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
#include "worker/trace_writer.h"

namespace sketchfuse {

// One step's figures, for metrics.
struct StepReport {
  int64_t step = 0;
  double seconds = 0;
  double loss = 0;
  size_t bytes_sent = 0;
  size_t dense_bytes = 0;
  bool collective = false;  // aggregated (at least in part) over the collectives
};

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

struct Progress {
  bool end_of_epoch = false;
  int epoch = 0;      // 1-based
  int64_t step = 0;   // global step, 1-based count of steps done
  double train_loss = 0;       // mean over the steps since the last report
  double test_accuracy = -1;   // at the end of an epoch; -1 otherwise
  double test_loss = -1;
  double step_seconds = 0;     // mean wall time per step since the last report
  double bytes_sent_per_step = 0;
  double compression_ratio = 0;  // dense bytes / bytes sent
  double elapsed_seconds = 0;    // since Run started
  double residual_norm = 0;      // L2 norm of the error-feedback residuals, all groups
};

struct TrainingSummary {
  std::vector<Progress> epochs;
  int64_t steps = 0;
  int64_t resumed_from_step = 0;
  double final_test_accuracy = 0;
  double wall_seconds = 0;
  double mean_step_seconds = 0;
  double bytes_sent_per_step = 0;
  double compression_ratio = 0;
  // Steps aggregated (at least in part) over the workers' collectives.
  int64_t collective_steps = 0;
};

// The run's data-dependent fields: layer sizes (model parameters in backward
// order) and steps per epoch, for `run` (workload, batch_size, train_examples
// set) with `world_size` workers. INVALID_ARGUMENT for an unknown model, a
// batch larger than a worker's shard.
absl::Status DescribeRun(uint32_t world_size, v1::RunConfig* run);

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
  // L2 norm of every group's error-feedback residual.
  double ResidualNorm() const;
  // Adds the step's timeline to the trace (within the traced steps).
  void TraceStep(int64_t step);
  absl::Status SaveCheckpoint(int64_t next_step) const;
  absl::StatusOr<int64_t> LoadCheckpoint();

  std::unique_ptr<State> state_;
  std::unique_ptr<StepPipeline> pipeline_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_TRAINER_H_
