#include "worker/training/models.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "torch/nn/functional/activation.h"
#include "torch/nn/functional/loss.h"
#include "torch/nn/functional/pooling.h"
#include "torch/utils.h"

namespace sketchfuse {

namespace F = torch::nn::functional;

MlpClassifier::MlpClassifier(int64_t hidden1, int64_t hidden2) {
  fc1_ = register_module("fc1", torch::nn::Linear(kImageSide * kImageSide, hidden1));
  fc2_ = register_module("fc2", torch::nn::Linear(hidden1, hidden2));
  fc3_ = register_module("fc3", torch::nn::Linear(hidden2, kNumClasses));
}

torch::Tensor MlpClassifier::forward(torch::Tensor x) {
  x = x.flatten(1);
  x = torch::relu(fc1_->forward(x));
  x = torch::relu(fc2_->forward(x));
  return fc3_->forward(x);
}

CnnClassifier::CnnClassifier(int64_t channels1, int64_t channels2) {
  conv1_ = register_module("conv1",
                           torch::nn::Conv2d(torch::nn::Conv2dOptions(1, channels1, 5).padding(2)));
  conv2_ = register_module(
      "conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(channels1, channels2, 5).padding(2)));
  const int64_t side = kImageSide / 4;  // Two 2x2 poolings.
  fc_ = register_module("fc", torch::nn::Linear(channels2 * side * side, kNumClasses));
}

torch::Tensor CnnClassifier::forward(torch::Tensor x) {
  x = torch::max_pool2d(torch::relu(conv1_->forward(x)), 2);
  x = torch::max_pool2d(torch::relu(conv2_->forward(x)), 2);
  return fc_->forward(x.flatten(1));
}

std::vector<std::string> KnownClassifiers() { return {"mlp", "cnn", "mlp_large", "cnn_wide"}; }

absl::StatusOr<std::shared_ptr<ClassifierImpl>> MakeClassifier(const std::string& name,
                                                               uint64_t seed) {
  std::shared_ptr<ClassifierImpl> model;
  torch::manual_seed(seed);
  if (name == "mlp") {
    model = std::make_shared<MlpClassifier>();
  } else if (name == "cnn") {
    model = std::make_shared<CnnClassifier>();
  } else if (name == "mlp_large") {
    model = std::make_shared<MlpClassifier>(1024, 1024);
  } else if (name == "cnn_wide") {
    model = std::make_shared<CnnClassifier>(64, 192);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown model \"", name, "\"; known models: ", absl::StrJoin(KnownClassifiers(), ", ")));
  }
  model->train();
  return model;
}

Evaluation Evaluate(ClassifierImpl& model, const ImageDataset& data, int64_t batch_size) {
  const int64_t n = data.size();
  if (n == 0) {
    return {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN()};
  }
  if (batch_size < 1) batch_size = n;
  // Restores the training mode on every exit, including a c10::Error.
  struct ModeGuard {
    ClassifierImpl& model;
    bool was_training;
    ~ModeGuard() { model.train(was_training); }
  } mode_guard{model, model.is_training()};
  model.eval();
  torch::NoGradGuard no_grad;
  double loss_sum = 0.0;
  int64_t correct = 0;
  for (int64_t begin = 0; begin < n; begin += batch_size) {
    const int64_t end = std::min(n, begin + batch_size);
    const torch::Tensor x = data.images.slice(0, begin, end);
    const torch::Tensor y = data.labels.slice(0, begin, end);
    const torch::Tensor logits = model.forward(x);
    loss_sum += F::cross_entropy(logits, y, F::CrossEntropyFuncOptions().reduction(torch::kSum))
                    .item<double>();
    correct += logits.argmax(1).eq(y).sum().item<int64_t>();
  }
  return {loss_sum / static_cast<double>(n), static_cast<double>(correct) / static_cast<double>(n)};
}

std::vector<int64_t> ParameterSizes(ClassifierImpl& model) {
  std::vector<int64_t> sizes;
  for (const torch::Tensor& p : model.parameters()) sizes.push_back(p.numel());
  return sizes;
}

}  // namespace sketchfuse
