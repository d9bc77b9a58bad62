// A small causal transformer over bytes (GPT-2's shape: pre-LayerNorm blocks
// of causal self-attention and a GELU MLP), the char_lm workload's model.
//
// Parameters, in the order parameters() lists them (the fusion planner's
// layer order, fixed): the position embedding [context, width] (the model's
// own parameter comes before its modules'), the token embedding
// [256, width], then for each block ln1 (weight, bias), attention qkv (weight, bias) and
// proj (weight, bias), ln2 (weight, bias), mlp fc1 (weight, bias) and fc2
// (weight, bias); then the final LayerNorm (weight, bias) and the head
// (weight, bias). Initialized as GPT-2: weights N(0, 0.02) (the projections
// into the residual stream N(0, 0.02 / sqrt(2 * layers))), biases 0,
// LayerNorms 1 and 0. No dropout.
//
// NOT thread-safe (LibTorch modules are not).
#ifndef SKETCHFUSE_WORKER_TRAINING_TRANSFORMER_H_
#define SKETCHFUSE_WORKER_TRAINING_TRANSFORMER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "torch/nn/module.h"
#include "torch/nn/modules/embedding.h"
#include "torch/nn/modules/linear.h"
#include "torch/nn/modules/normalization.h"
#include "torch/types.h"

namespace sketchfuse {

struct TransformerShape {
  int64_t vocabulary = 256;
  int64_t context = 64;
  int64_t width = 128;
  int64_t heads = 4;
  int64_t layers = 2;
  int64_t mlp_factor = 4;
};

class CausalSelfAttention : public torch::nn::Module {
 public:
  CausalSelfAttention(int64_t width, int64_t heads);
  // x: [B, T, width] -> [B, T, width]; position t attends to positions <= t.
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Linear& proj() { return proj_; }

 private:
  int64_t heads_;
  torch::nn::Linear qkv_{nullptr}, proj_{nullptr};
};

class TransformerBlock : public torch::nn::Module {
 public:
  TransformerBlock(int64_t width, int64_t heads, int64_t mlp_factor);
  torch::Tensor forward(const torch::Tensor& x);
  // The layers whose outputs join the residual stream (their init is scaled).
  std::vector<torch::nn::Linear> residual_projections() { return {attention_->proj(), fc2_}; }

 private:
  torch::nn::LayerNorm ln1_{nullptr}, ln2_{nullptr};
  std::shared_ptr<CausalSelfAttention> attention_;
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
};

class CharTransformer : public torch::nn::Module {
 public:
  explicit CharTransformer(const TransformerShape& shape);
  // tokens: [B, T] int64 byte values, T <= context. Returns [B, T, vocabulary]
  // logits of each next byte.
  torch::Tensor forward(const torch::Tensor& tokens);
  const TransformerShape& shape() const { return shape_; }

 private:
  TransformerShape shape_;
  torch::nn::Embedding token_embedding_{nullptr};
  torch::Tensor position_embedding_;
  std::vector<std::shared_ptr<TransformerBlock>> blocks_;
  torch::nn::LayerNorm final_norm_{nullptr};
  torch::nn::Linear head_{nullptr};
};

// The char_lm workload's model, its parameters drawn from `seed`
// (torch::manual_seed(seed) first, as MakeClassifier does), in training mode.
std::shared_ptr<CharTransformer> MakeCharTransformer(uint64_t seed, const TransformerShape& shape = {});

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_TRAINING_TRANSFORMER_H_
