// Generators for the gradient-tensor profiles declared in model_profiles.h.
// Every list is built by walking the architecture with its real
// hyperparameters, following PyTorch's parameter registration order.

#include "common/model_profiles.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace sketchfuse {
namespace {

// Appends a tensor named `prefix` + `suffix` with `n` elements.
void Add(ModelProfile& p, absl::string_view prefix, absl::string_view suffix,
         int64_t n) {
  p.tensors.push_back({absl::StrCat(prefix, suffix), n});
}

// Conv2d without bias: weight [out, in, k, k].
void AddConv(ModelProfile& p, absl::string_view prefix, int64_t in,
             int64_t out, int64_t k) {
  Add(p, prefix, ".weight", out * in * k * k);
}

// Norm layer (BatchNorm / LayerNorm) with affine weight and bias.
void AddNorm(ModelProfile& p, absl::string_view prefix, int64_t c) {
  Add(p, prefix, ".weight", c);
  Add(p, prefix, ".bias", c);
}

// nn.Linear: weight [out, in] and bias [out].
void AddLinear(ModelProfile& p, absl::string_view prefix, int64_t in,
               int64_t out) {
  Add(p, prefix, ".weight", out * in);
  Add(p, prefix, ".bias", out);
}

}  // namespace

int64_t ModelProfile::TotalElements() const {
  int64_t total = 0;
  for (const TensorSpec& t : tensors) total += t.num_elements;
  return total;
}

int64_t ModelProfile::LargestTensor() const {
  int64_t largest = 0;
  for (const TensorSpec& t : tensors) largest = std::max(largest, t.num_elements);
  return largest;
}

int64_t ModelProfile::MedianTensor() const {
  if (tensors.empty()) return 0;
  std::vector<int64_t> sizes;
  sizes.reserve(tensors.size());
  for (const TensorSpec& t : tensors) sizes.push_back(t.num_elements);
  std::sort(sizes.begin(), sizes.end());
  return sizes[sizes.size() / 2];
}

int64_t ModelProfile::CountSmallerThan(int64_t n) const {
  return std::count_if(tensors.begin(), tensors.end(),
                       [n](const TensorSpec& t) { return t.num_elements < n; });
}

std::vector<TensorSpec> ModelProfile::BackwardOrder() const {
  return std::vector<TensorSpec>(tensors.rbegin(), tensors.rend());
}

ModelProfile ResNet50Profile() {
  ModelProfile p{"resnet50", {}};
  AddConv(p, "conv1", 3, 64, 7);
  AddNorm(p, "bn1", 64);
  const int kBlocks[4] = {3, 4, 6, 3};
  const int64_t kExpansion = 4;
  int64_t in = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t width = int64_t{64} << stage;
    const int64_t out = width * kExpansion;
    for (int b = 0; b < kBlocks[stage]; ++b) {
      const std::string blk = absl::StrCat("layer", stage + 1, ".", b, ".");
      AddConv(p, absl::StrCat(blk, "conv1"), in, width, 1);
      AddNorm(p, absl::StrCat(blk, "bn1"), width);
      AddConv(p, absl::StrCat(blk, "conv2"), width, width, 3);
      AddNorm(p, absl::StrCat(blk, "bn2"), width);
      AddConv(p, absl::StrCat(blk, "conv3"), width, out, 1);
      AddNorm(p, absl::StrCat(blk, "bn3"), out);
      if (b == 0) {  // Projection shortcut: channel (and stride) change.
        AddConv(p, absl::StrCat(blk, "downsample.0"), in, out, 1);
        AddNorm(p, absl::StrCat(blk, "downsample.1"), out);
      }
      in = out;
    }
  }
  AddLinear(p, "fc", in, 1000);
  return p;
}

ModelProfile Vgg16Profile() {
  ModelProfile p{"vgg16", {}};
  // torchvision cfg "D"; 0 marks a max-pool. Each conv is followed by a ReLU,
  // and every module takes one index in `features`.
  const int kCfg[] = {64,  64,  0,   128, 128, 0,   256, 256, 256,
                      0,   512, 512, 512, 0,   512, 512, 512, 0};
  int64_t in = 3;
  int index = 0;
  for (int c : kCfg) {
    if (c == 0) {
      ++index;  // MaxPool2d.
      continue;
    }
    const std::string conv = absl::StrCat("features.", index);
    AddConv(p, conv, in, c, 3);
    Add(p, conv, ".bias", c);
    in = c;
    index += 2;  // Conv2d + ReLU.
  }
  // Classifier: Linear, ReLU, Dropout, Linear, ReLU, Dropout, Linear.
  AddLinear(p, "classifier.0", in * 7 * 7, 4096);
  AddLinear(p, "classifier.3", 4096, 4096);
  AddLinear(p, "classifier.6", 4096, 1000);
  return p;
}

ModelProfile BertBaseProfile() {
  ModelProfile p{"bert_base", {}};
  const int64_t kVocab = 30522, kHidden = 768, kLayers = 12,
                kIntermediate = 3072, kMaxPos = 512, kTypeVocab = 2;
  Add(p, "embeddings.word_embeddings", ".weight", kVocab * kHidden);
  Add(p, "embeddings.position_embeddings", ".weight", kMaxPos * kHidden);
  Add(p, "embeddings.token_type_embeddings", ".weight", kTypeVocab * kHidden);
  AddNorm(p, "embeddings.LayerNorm", kHidden);
  for (int i = 0; i < kLayers; ++i) {
    const std::string l = absl::StrCat("encoder.layer.", i, ".");
    AddLinear(p, absl::StrCat(l, "attention.self.query"), kHidden, kHidden);
    AddLinear(p, absl::StrCat(l, "attention.self.key"), kHidden, kHidden);
    AddLinear(p, absl::StrCat(l, "attention.self.value"), kHidden, kHidden);
    AddLinear(p, absl::StrCat(l, "attention.output.dense"), kHidden, kHidden);
    AddNorm(p, absl::StrCat(l, "attention.output.LayerNorm"), kHidden);
    AddLinear(p, absl::StrCat(l, "intermediate.dense"), kHidden, kIntermediate);
    AddLinear(p, absl::StrCat(l, "output.dense"), kIntermediate, kHidden);
    AddNorm(p, absl::StrCat(l, "output.LayerNorm"), kHidden);
  }
  AddLinear(p, "pooler.dense", kHidden, kHidden);
  return p;
}

ModelProfile Gpt2SmallProfile() {
  ModelProfile p{"gpt2_small", {}};
  const int64_t kVocab = 50257, kCtx = 1024, kHidden = 768, kLayers = 12;
  Add(p, "wte", ".weight", kVocab * kHidden);
  Add(p, "wpe", ".weight", kCtx * kHidden);
  for (int i = 0; i < kLayers; ++i) {
    // Conv1D layers: weight [in, out] and bias [out], same counts as Linear.
    const std::string h = absl::StrCat("h.", i, ".");
    AddNorm(p, absl::StrCat(h, "ln_1"), kHidden);
    AddLinear(p, absl::StrCat(h, "attn.c_attn"), kHidden, 3 * kHidden);
    AddLinear(p, absl::StrCat(h, "attn.c_proj"), kHidden, kHidden);
    AddNorm(p, absl::StrCat(h, "ln_2"), kHidden);
    AddLinear(p, absl::StrCat(h, "mlp.c_fc"), kHidden, 4 * kHidden);
    AddLinear(p, absl::StrCat(h, "mlp.c_proj"), 4 * kHidden, kHidden);
  }
  AddNorm(p, "ln_f", kHidden);
  return p;
}

std::vector<std::string> ModelProfileNames() {
  return {"resnet50", "vgg16", "bert_base", "gpt2_small"};
}

absl::StatusOr<ModelProfile> ModelProfileByName(absl::string_view name) {
  if (name == "resnet50") return ResNet50Profile();
  if (name == "vgg16") return Vgg16Profile();
  if (name == "bert_base") return BertBaseProfile();
  if (name == "gpt2_small") return Gpt2SmallProfile();
  return absl::InvalidArgumentError(
      absl::StrCat("unknown model profile \"", name, "\"; valid names: ",
                   absl::StrJoin(ModelProfileNames(), ", ")));
}

}  // namespace sketchfuse
