// Gradient-tensor size profiles of real neural-network architectures.
//
// Each profile lists a model's parameter tensors (one gradient tensor per
// parameter) with PyTorch-style names and element counts. The lists are
// generated from the architectures' hyperparameters (stages, blocks, layer
// widths), not typed in, and feed the fusion planner and the benchmarks.

#ifndef SKETCHFUSE_COMMON_MODEL_PROFILES_H_
#define SKETCHFUSE_COMMON_MODEL_PROFILES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sketchfuse {

// One gradient tensor (one parameter tensor of the model).
struct TensorSpec {
  std::string name;      // e.g. "layer1.0.conv1.weight" (PyTorch-style naming)
  int64_t num_elements;  // > 0
};

// A model's parameter tensors in forward (registration) order, as PyTorch
// lists them in `model.named_parameters()`.
struct ModelProfile {
  std::string name;
  std::vector<TensorSpec> tensors;

  // Sum of all tensor sizes (the model's parameter count); 0 if empty.
  int64_t TotalElements() const;
  // Size of the largest tensor; 0 if empty.
  int64_t LargestTensor() const;
  // Median of tensor sizes: the element at position n/2 of the sorted sizes
  // (the upper of the two middle values for an even count, the convention of
  // the reference table in shared/ALGORITHMS.md); 0 if empty.
  int64_t MedianTensor() const;
  // Number of tensors with fewer than `n` elements.
  int64_t CountSmallerThan(int64_t n) const;
  // Tensors in the order the backward pass produces their gradients
  // (reverse of forward order).
  std::vector<TensorSpec> BackwardOrder() const;
};

// torchvision resnet50: 53 convs (incl. 4 downsample), 53 BatchNorms (weight
// and bias each), fc 2048x1000 plus bias; convs have no bias. 161 tensors.
ModelProfile ResNet50Profile();

// torchvision vgg16 (no BatchNorm): 13 convs (weight and bias), classifier
// 25088x4096, 4096x4096, 4096x1000 (with biases). 32 tensors.
ModelProfile Vgg16Profile();

// Hugging Face bert-base-uncased BertModel: vocab 30522, hidden 768,
// 12 layers, intermediate 3072, 512 positions, 2 token types, with pooler.
// 199 tensors.
ModelProfile BertBaseProfile();

// Hugging Face GPT-2 small: vocab 50257, n_ctx 1024, hidden 768, 12 layers,
// final LayerNorm; lm_head is tied to wte and not counted. 148 tensors.
ModelProfile Gpt2SmallProfile();

// Returns the profile named `name` ("resnet50", "vgg16", "bert_base",
// "gpt2_small"). An unknown name yields INVALID_ARGUMENT naming it and
// listing the valid names.
absl::StatusOr<ModelProfile> ModelProfileByName(absl::string_view name);

// The names ModelProfileByName accepts, in a fixed order.
std::vector<std::string> ModelProfileNames();

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_MODEL_PROFILES_H_
