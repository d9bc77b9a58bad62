// The Fashion-MNIST classifiers the workers train, their evaluation, and the
// per-parameter sizes the fusion planner groups into fusion buffers.
//
// Every model maps images [B, 1, 28, 28] float32 to logits [B, 10]. Models
// are held as std::shared_ptr<ClassifierImpl> (the abstract base cannot use
// TORCH_MODULE); parameters() returns the parameters in registration order,
// which is the "layer" order of the fusion planner and is fixed per model:
//   "mlp": fc1.weight, fc1.bias, fc2.weight, fc2.bias, fc3.weight, fc3.bias
//   "cnn": conv1.weight, conv1.bias, conv2.weight, conv2.bias, fc.weight, fc.bias
// ("mlp_large" and "cnn_wide" are the same layers, wider).
//
// NOTE: not thread-safe (LibTorch modules are not); one model per thread.
#ifndef SKETCHFUSE_WORKER_TRAINING_MODELS_H_
#define SKETCHFUSE_WORKER_TRAINING_MODELS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "torch/nn/module.h"
#include "torch/nn/modules/conv.h"
#include "torch/nn/modules/linear.h"
#include "torch/types.h"
#include "worker/training/fashion_mnist.h"
#include "worker/training/evaluation.h"

namespace sketchfuse {

// A classifier over [B, 1, 28, 28] images producing [B, 10] logits.
class ClassifierImpl : public torch::nn::Module {
 public:
  ~ClassifierImpl() override = default;

  // x: [B, 1, 28, 28] float32 (B may be 0). Returns [B, 10] logits.
  // LibTorch throws c10::Error on a wrongly shaped input.
  virtual torch::Tensor forward(torch::Tensor x) = 0;
};

// "mlp": flatten 784 -> hidden1 -> ReLU -> hidden2 -> ReLU -> 10.
class MlpClassifier final : public ClassifierImpl {
 public:
  explicit MlpClassifier(int64_t hidden1 = 256, int64_t hidden2 = 128);
  torch::Tensor forward(torch::Tensor x) override;

 private:
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr}, fc3_{nullptr};
};

// "cnn": conv 1->channels1 5x5 pad 2, ReLU, maxpool 2; conv channels1->channels2
// 5x5 pad 2, ReLU, maxpool 2; linear channels2*7*7 -> 10.
class CnnClassifier final : public ClassifierImpl {
 public:
  explicit CnnClassifier(int64_t channels1 = 16, int64_t channels2 = 32);
  torch::Tensor forward(torch::Tensor x) override;

 private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::Linear fc_{nullptr};
};

// Names MakeClassifier accepts, in a fixed order: {"mlp", "cnn", "mlp_large",
// "cnn_wide"}. The last two are the scale study's larger models, so that no
// default is tuned to one small model: "mlp_large" is MlpClassifier(1024,
// 1024) (1.86M parameters), "cnn_wide" CnnClassifier(64, 192) (0.40M).
std::vector<std::string> KnownClassifiers();

// Builds the model `name` (default sizes) with parameters initialized
// deterministically from `seed`: two processes of the same build with the same
// name and seed get bit-identical parameters. Reseeds LibTorch's global CPU
// generator (torch::manual_seed(seed)) to do so; later random draws in the
// process follow from that seed. The model is in training mode.
// INVALID_ARGUMENT naming the unknown model and listing the known ones.
absl::StatusOr<std::shared_ptr<ClassifierImpl>> MakeClassifier(const std::string& name,
                                                               uint64_t seed);

// Evaluates `model` on `data` in batches of `batch_size` (a batch_size below 1
// means one batch of everything), under no-grad and in eval mode; the model's
// training mode is restored afterwards. An empty dataset gives NaN loss and
// NaN accuracy. Throws c10::Error if the data does not fit the model.
Evaluation Evaluate(ClassifierImpl& model, const ImageDataset& data, int64_t batch_size);

// numel of each tensor of model.parameters(), in that order; sums to the
// model's parameter count.
std::vector<int64_t> ParameterSizes(ClassifierImpl& model);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_TRAINING_MODELS_H_
