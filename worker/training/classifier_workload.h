// A LibTorch classifier of Fashion-MNIST (the worker's models: mlp, cnn,
// mlp_large, cnn_wide) as a step loop's Workload (worker/training/
// step_loop.h), for one participant (a worker process) or several (virtual
// workers over the one model).
//
// Each participant trains on its rank's shard of the run's training
// examples (TrainShardOf). The model's initial parameters follow from
// run.seed; autograd's hook on each parameter hands its gradient to the
// pipeline of the participant whose backward pass runs (FeedLayer). Apply
// steps the optimizer (SGD; with momentum only where the optimizer keeps it,
// MomentumPlaceOf) on the mean update (ApplyMeanUpdates). Evaluate scores
// the test set (run.test_examples of it, or all) or its first
// `eval_examples` (the curve's subset), in batches of 1000.
#ifndef SKETCHFUSE_WORKER_TRAINING_CLASSIFIER_WORKLOAD_H_
#define SKETCHFUSE_WORKER_TRAINING_CLASSIFIER_WORKLOAD_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/job_config.pb.h"
#include "torch/optim/sgd.h"
#include "worker/training/fashion_mnist.h"
#include "worker/training/models.h"
#include "worker/training/step_loop.h"

namespace sketchfuse {

// Applies a step's aggregated updates (one per group of `layout`, each the
// sum over `world` workers) to `params` (forward order; layers are numbered
// in backward order): an SGD step of `optimizer` at rate `rate` on their
// mean (worker/pipeline/step_apply.h ForEachMeanValue). ClassifierWorkload::Apply.
//   - Without momentum in the optimizer (the compressing schemes keep it on
//     the worker) each coordinate an update carries is stepped in place,
//     p = fma(-rate, mean, p): torch's SGD step element for element (its
//     vectorized add is a fused multiply-add on the x86 builds these
//     machines run; the same bits, tested in apply_mean_updates_test), so a
//     sparse update costs its nonzeros, not the model's size.
//   - With momentum (the dense schemes leave it to the optimizer), the means
//     become the parameters' .grad through `buffer` (scratch) and the
//     optimizer steps: its velocity is dense.
// INTERNAL, with nothing applied, for an update that does not fit its group
// or parameters that do not fit the layout.
absl::Status ApplyMeanUpdates(const std::vector<Update>& updates, const FusionLayout& layout, uint32_t world,
                              double rate, std::vector<torch::Tensor>& params, torch::optim::SGD& optimizer,
                              std::vector<float>* buffer);

// Worker `rank`'s shard of the run's training examples (the first
// run.train_examples() of `train`; all of them when 0).
absl::StatusOr<ImageDataset> TrainShardOf(const v1::RunConfig& run, const ImageDataset& train, uint32_t rank,
                                          uint32_t world);

// What an autograd hook does with parameter `param`'s gradient `grad`
// (layer `layer`, in backward order): hands the parameter's values (for
// schemes that need them) and the gradient to `sink`; with `inject_nan`, the
// gradient's first element is a NaN (tests of divergence). Errors fail the
// step (FinishStep reports them). The trainer's and the virtual workers'
// hooks.
void FeedLayer(StepPipeline& sink, int layer, const torch::Tensor& param, const torch::Tensor& grad,
               bool inject_nan);

// Sets every parameter group's rate of an SGD optimizer.
void SetLearningRate(torch::optim::SGD& optimizer, double rate);

struct ClassifierWorkloadConfig {
  v1::RunConfig run;
  uint32_t world = 1;
  // Each participant's rank (its data shard) and pipeline (where its
  // gradients go; not owned, outlives the workload).
  std::vector<uint32_t> ranks;
  std::vector<StepPipeline*> pipelines;
  std::string data_dir = kFashionMnistDir;
  // The curve's subset: the test set's first this many examples.
  int64_t eval_examples = 2000;
  // Tests only: in this step (>= 0), participant inject_nan_participant's
  // first gradient of the backward pass (layer 0) gets a NaN. -1: never.
  int64_t inject_nan_gradient_at_step = -1;
  uint32_t inject_nan_participant = 0;
};

class ClassifierWorkload final : public Workload {
 public:
  // Loads the data and builds the model and its optimizer. INVALID_ARGUMENT
  // for a participant's shard smaller than a batch, eval_examples < 1, or
  // mismatched ranks and pipelines; the data's and the model's errors.
  static absl::StatusOr<std::unique_ptr<ClassifierWorkload>> Create(ClassifierWorkloadConfig config);

  int64_t examples(uint32_t participant) const override { return train_[participant].size(); }
  int loss_classes() const override { return kNumClasses; }
  absl::StatusOr<double> Forward(uint32_t participant, int64_t step, absl::Span<const int64_t> batch) override;
  absl::Status Backward(uint32_t participant, int64_t step, StepPipeline& pipeline) override;
  absl::Status Apply(const std::vector<Update>& updates, const FusionLayout& layout, uint32_t world,
                     double rate) override;
  std::optional<Evaluation> Evaluate(bool whole_test_set) override;

  // The model's parameters (forward order) and optimizer, for checkpoints.
  std::vector<torch::Tensor>& params() { return params_; }
  const std::vector<torch::Tensor>& params() const { return params_; }
  torch::optim::SGD& optimizer() { return *optimizer_; }
  // Parameters flattened in forward order (for tests comparing runs).
  std::vector<float> FlatParameters() const;

 private:
  explicit ClassifierWorkload(ClassifierWorkloadConfig config) : config_(std::move(config)) {}

  ClassifierWorkloadConfig config_;
  std::shared_ptr<ClassifierImpl> model_;
  std::vector<torch::Tensor> params_;  // forward order
  std::unique_ptr<torch::optim::SGD> optimizer_;
  std::vector<ImageDataset> train_;  // by participant
  ImageDataset test_, eval_;
  std::vector<float> apply_buffer_;
  torch::Tensor loss_;  // the last Forward's, for its Backward
  // The participant whose backward pass runs (the hooks feed its pipeline),
  // and its step.
  std::atomic<uint32_t> current_{0};
  int64_t current_step_ = -1;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_TRAINING_CLASSIFIER_WORKLOAD_H_
