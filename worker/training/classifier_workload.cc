#include "worker/training/classifier_workload.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "torch/nn/functional.h"

namespace sketchfuse {

namespace {

// The training examples a run uses.
int64_t TrainExamples(const v1::RunConfig& run, int64_t available) {
  return run.train_examples() > 0 ? std::min<int64_t>(run.train_examples(), available) : available;
}

}  // namespace

absl::StatusOr<ImageDataset> TrainShardOf(const v1::RunConfig& run, const ImageDataset& train, uint32_t rank,
                                          uint32_t world) {
  return ShardOf(Head(train, TrainExamples(run, train.size())), rank, world);
}

absl::StatusOr<std::unique_ptr<ClassifierWorkload>> ClassifierWorkload::Create(TorchWorkloadConfig config) {
  if (config.eval_examples < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the curve needs eval_examples >= 1; got ", config.eval_examples));
  }
  if (config.data_dir.empty()) config.data_dir = kFashionMnistDir;
  std::unique_ptr<ClassifierWorkload> w(new ClassifierWorkload(std::move(config)));
  const TorchWorkloadConfig& c = w->config();
  const v1::RunConfig& run = c.run;
  absl::StatusOr<ImageDataset> train = LoadFashionMnist(c.data_dir, Split::kTrain);
  if (!train.ok()) return train.status();
  absl::StatusOr<ImageDataset> test = LoadFashionMnist(c.data_dir, Split::kTest);
  if (!test.ok()) return test.status();
  for (const uint32_t rank : c.ranks) {
    absl::StatusOr<ImageDataset> shard = TrainShardOf(run, *train, rank, c.world);
    if (!shard.ok()) return shard.status();
    if (shard->size() < static_cast<int64_t>(run.batch_size())) {
      return absl::InvalidArgumentError(absl::StrCat("worker ", rank, "'s shard has ", shard->size(),
                                                     " examples, fewer than a batch of ", run.batch_size()));
    }
    w->train_.push_back(*std::move(shard));
  }
  w->test_ = run.test_examples() > 0 ? Head(*test, run.test_examples()) : *std::move(test);
  w->eval_ = Head(w->test_, std::min<int64_t>(c.eval_examples, w->test_.size()));

  absl::StatusOr<std::shared_ptr<ClassifierImpl>> model = MakeClassifier(run.workload(), run.seed());
  if (!model.ok()) return model.status();
  w->model_ = *model;
  if (absl::Status s = w->Init(w->model_->parameters()); !s.ok()) return s;
  return w;
}

absl::StatusOr<double> ClassifierWorkload::Forward(uint32_t participant, int64_t step,
                                                   absl::Span<const int64_t> batch) {
  BeginForward(participant, step);
  const ImageDataset& shard = train_[participant];
  torch::Tensor index =
      torch::from_blob(const_cast<int64_t*>(batch.data()), {static_cast<int64_t>(batch.size())}, torch::kInt64)
          .clone();
  loss_ = torch::nn::functional::cross_entropy(model_->forward(shard.images.index_select(0, index)),
                                               shard.labels.index_select(0, index));
  return loss_.item<double>();
}

std::optional<Evaluation> ClassifierWorkload::Evaluate(bool whole_test_set) {
  return sketchfuse::Evaluate(*model_, whole_test_set ? test_ : eval_, 1000);
}

}  // namespace sketchfuse
