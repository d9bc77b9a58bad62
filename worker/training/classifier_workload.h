// A LibTorch classifier of Fashion-MNIST (the worker's models: mlp, cnn,
// mlp_large, cnn_wide) as a step loop's Workload (worker/training/
// step_loop.h), for one participant (a worker process) or several (virtual
// workers over the one model).
//
// Each participant trains on its rank's shard of the run's training
// examples (TrainShardOf). The model's initial parameters follow from
// run.seed; gradients reach the pipelines and the optimizer applies the
// mean update as every LibTorch workload's do (worker/training/
// torch_workload.h). Evaluate scores the test set (run.test_examples of it,
// or all) or its first `eval_examples` (the curve's subset), in batches of
// 1000; the run is judged by test accuracy.
#ifndef SKETCHFUSE_WORKER_TRAINING_CLASSIFIER_WORKLOAD_H_
#define SKETCHFUSE_WORKER_TRAINING_CLASSIFIER_WORKLOAD_H_

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/job_config.pb.h"
#include "worker/training/fashion_mnist.h"
#include "worker/training/models.h"
#include "worker/training/torch_workload.h"

namespace sketchfuse {

// Worker `rank`'s shard of the run's training examples (the first
// run.train_examples() of `train`; all of them when 0).
absl::StatusOr<ImageDataset> TrainShardOf(const v1::RunConfig& run, const ImageDataset& train, uint32_t rank,
                                          uint32_t world);

class ClassifierWorkload final : public TorchWorkload {
 public:
  // Loads the data (config.data_dir) and builds the model and its
  // optimizer. INVALID_ARGUMENT for a participant's shard smaller than a
  // batch, eval_examples < 1, or mismatched ranks and pipelines; the data's,
  // the model's and the optimizer's errors.
  static absl::StatusOr<std::unique_ptr<ClassifierWorkload>> Create(TorchWorkloadConfig config);

  int64_t examples(uint32_t participant) const override { return train_[participant].size(); }
  int loss_classes() const override { return kNumClasses; }
  absl::StatusOr<double> Forward(uint32_t participant, int64_t step, absl::Span<const int64_t> batch) override;
  std::optional<Evaluation> Evaluate(bool whole_test_set) override;

 private:
  explicit ClassifierWorkload(TorchWorkloadConfig config) : TorchWorkload(std::move(config)) {}

  std::shared_ptr<ClassifierImpl> model_;
  std::vector<ImageDataset> train_;  // by participant
  ImageDataset test_, eval_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_TRAINING_CLASSIFIER_WORKLOAD_H_
