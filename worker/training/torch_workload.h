// What every LibTorch workload of the step loop (worker/training/step_loop.h)
// shares: a model's parameters, whose gradients autograd hands to the
// pipeline of the participant whose backward pass runs (FeedLayer), and the
// run's optimizer (worker/training/optimizer.h), which applies the step's
// aggregated updates (ApplyMeanUpdates). A subclass brings the data, the
// model's forward pass and loss, and the evaluation: ClassifierWorkload
// (Fashion-MNIST), LanguageModelWorkload (a character-level transformer);
// worker/training/make_workload.h builds the one a run names.
#ifndef SKETCHFUSE_WORKER_TRAINING_TORCH_WORKLOAD_H_
#define SKETCHFUSE_WORKER_TRAINING_TORCH_WORKLOAD_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/job_config.pb.h"
#include "torch/optim/optimizer.h"
#include "torch/types.h"
#include "worker/pipeline/step_pipeline.h"
#include "worker/training/step_loop.h"

namespace sketchfuse {

// What a hook does with parameter `param`'s gradient `grad` (layer `layer`,
// in backward order): hands the parameter's values (for schemes that need
// them) and the gradient to `sink`; with `inject_nan`, the gradient's first
// element is a NaN (tests of divergence). Errors fail the step (FinishStep
// reports them).
void FeedLayer(StepPipeline& sink, int layer, const torch::Tensor& param, const torch::Tensor& grad,
               bool inject_nan);

struct TorchWorkloadConfig {
  v1::RunConfig run;
  uint32_t world = 1;
  // Each participant's rank (its data shard) and pipeline (where its
  // gradients go; not owned, outlives the workload).
  std::vector<uint32_t> ranks;
  std::vector<StepPipeline*> pipelines;
  // Where the data is: Fashion-MNIST's IDX files (the classifiers) and the
  // text corpus (the language model).
  std::string data_dir;
  std::string corpus_dir;
  // The curve's subset: the held-out set's first this many examples.
  int64_t eval_examples = 2000;
  // Tests only: in this step (>= 0), participant inject_nan_participant's
  // first gradient of the backward pass (layer 0) gets a NaN. -1: never.
  int64_t inject_nan_gradient_at_step = -1;
  uint32_t inject_nan_participant = 0;
};

class TorchWorkload : public Workload {
 public:
  ~TorchWorkload() override = default;

  // Backward runs the last Forward's loss through autograd; Apply steps the
  // optimizer on the mean update at `rate` (ApplyMeanUpdates).
  absl::Status Backward(uint32_t participant, int64_t step, StepPipeline& pipeline) override;
  absl::Status Apply(const std::vector<Update>& updates, const FusionLayout& layout, uint32_t world,
                     double rate) override;

  // The model's parameters (forward order) and the optimizer, for
  // checkpoints.
  std::vector<torch::Tensor>& params() { return params_; }
  const std::vector<torch::Tensor>& params() const { return params_; }
  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  // Parameters flattened in forward order (for tests comparing runs).
  std::vector<float> FlatParameters() const;

 protected:
  explicit TorchWorkload(TorchWorkloadConfig config) : config_(std::move(config)) {}

  // Takes the model's parameters (forward order), builds the run's
  // optimizer over them and hooks each to the pipelines. INVALID_ARGUMENT
  // for mismatched ranks and pipelines or an optimizer the run cannot have.
  absl::Status Init(std::vector<torch::Tensor> params);
  // Before a participant's forward pass: whose backward pass comes next,
  // and no gradient left from the last.
  void BeginForward(uint32_t participant, int64_t step);

  const TorchWorkloadConfig& config() const { return config_; }
  // The last Forward's loss, for its Backward.
  torch::Tensor loss_;

 private:
  TorchWorkloadConfig config_;
  std::vector<torch::Tensor> params_;  // forward order
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::vector<float> apply_buffer_;
  // The participant whose backward pass runs (the hooks feed its pipeline),
  // and its step.
  std::atomic<uint32_t> current_{0};
  int64_t current_step_ = -1;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_TRAINING_TORCH_WORKLOAD_H_
