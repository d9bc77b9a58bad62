#include "worker/training/transformer.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "torch/nn/functional.h"
#include "torch/nn/init.h"

namespace sketchfuse {

namespace F = torch::nn::functional;

CausalSelfAttention::CausalSelfAttention(int64_t width, int64_t heads) : heads_(heads) {
  qkv_ = register_module("qkv", torch::nn::Linear(width, 3 * width));
  proj_ = register_module("proj", torch::nn::Linear(width, width));
}

torch::Tensor CausalSelfAttention::forward(const torch::Tensor& x) {
  const int64_t batch = x.size(0), time = x.size(1), width = x.size(2), head_width = width / heads_;
  // [B, T, 3 * width] -> three [B, heads, T, head_width].
  std::vector<torch::Tensor> qkv = qkv_->forward(x).chunk(3, /*dim=*/2);
  auto heads_of = [&](const torch::Tensor& t) { return t.view({batch, time, heads_, head_width}).transpose(1, 2); };
  const torch::Tensor q = heads_of(qkv[0]), k = heads_of(qkv[1]), v = heads_of(qkv[2]);
  torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(head_width));
  const torch::Tensor future = torch::ones({time, time}, torch::kBool).triu(/*diagonal=*/1);
  scores = scores.masked_fill(future, -std::numeric_limits<float>::infinity());
  const torch::Tensor mixed = torch::matmul(torch::softmax(scores, -1), v);
  return proj_->forward(mixed.transpose(1, 2).contiguous().view({batch, time, width}));
}

TransformerBlock::TransformerBlock(int64_t width, int64_t heads, int64_t mlp_factor) {
  ln1_ = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
  attention_ = register_module("attention", std::make_shared<CausalSelfAttention>(width, heads));
  ln2_ = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
  fc1_ = register_module("fc1", torch::nn::Linear(width, mlp_factor * width));
  fc2_ = register_module("fc2", torch::nn::Linear(mlp_factor * width, width));
}

torch::Tensor TransformerBlock::forward(const torch::Tensor& x) {
  torch::Tensor h = x + attention_->forward(ln1_->forward(x));
  return h + fc2_->forward(F::gelu(fc1_->forward(ln2_->forward(h))));
}

CharTransformer::CharTransformer(const TransformerShape& shape) : shape_(shape) {
  token_embedding_ = register_module("token_embedding", torch::nn::Embedding(shape.vocabulary, shape.width));
  position_embedding_ = register_parameter("position_embedding", torch::zeros({shape.context, shape.width}));
  for (int64_t i = 0; i < shape.layers; ++i) {
    blocks_.push_back(register_module(absl::StrCat("block", i),
                                      std::make_shared<TransformerBlock>(shape.width, shape.heads, shape.mlp_factor)));
  }
  final_norm_ = register_module("final_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({shape.width})));
  head_ = register_module("head", torch::nn::Linear(shape.width, shape.vocabulary));

  // GPT-2's initialization.
  torch::NoGradGuard no_grad;
  const double std = 0.02, residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(shape.layers));
  torch::nn::init::normal_(token_embedding_->weight, 0.0, std);
  torch::nn::init::normal_(position_embedding_, 0.0, std);
  for (auto& block : blocks_) {
    for (auto& module : block->modules(/*include_self=*/false)) {
      if (auto* linear = module->as<torch::nn::Linear>()) {
        torch::nn::init::normal_(linear->weight, 0.0, std);
        torch::nn::init::zeros_(linear->bias);
      }
    }
    for (torch::nn::Linear& projection : block->residual_projections()) {
      torch::nn::init::normal_(projection->weight, 0.0, residual_std);
    }
  }
  torch::nn::init::normal_(head_->weight, 0.0, std);
  torch::nn::init::zeros_(head_->bias);
}

torch::Tensor CharTransformer::forward(const torch::Tensor& tokens) {
  const int64_t time = tokens.size(1);
  torch::Tensor x = token_embedding_->forward(tokens) + position_embedding_.slice(0, 0, time);
  for (auto& block : blocks_) x = block->forward(x);
  return head_->forward(final_norm_->forward(x));
}

std::shared_ptr<CharTransformer> MakeCharTransformer(uint64_t seed, const TransformerShape& shape) {
  torch::manual_seed(seed);
  auto model = std::make_shared<CharTransformer>(shape);
  model->train();
  return model;
}

}  // namespace sketchfuse
