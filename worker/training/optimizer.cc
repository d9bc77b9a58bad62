#include "worker/training/optimizer.h"

#include <cmath>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "torch/optim/adam.h"
#include "torch/optim/adamw.h"
#include "torch/optim/sgd.h"
#include "worker/pipeline/step_apply.h"
#include "worker/schemes/scheme_registry.h"
#include "worker/training/optimizer_spec.h"

namespace sketchfuse {
namespace {

// The means as each parameter's .grad, through the flat `buffer`.
absl::Status SetMeanGradients(const std::vector<Update>& updates, const FusionLayout& layout, float scale,
                              std::vector<torch::Tensor>& params, std::vector<float>* buffer) {
  const int num_params = static_cast<int>(params.size());
  buffer->assign(static_cast<size_t>(layout.total_size()), 0.0f);
  for (int g = 0; g < layout.num_groups(); ++g) {
    float* group = buffer->data() + layout.group(g).begin;
    absl::Status s = ForEachMeanValue(updates[g], static_cast<uint64_t>(layout.group_size(g)), scale,
                                      [group](uint64_t i, float mean) { group[i] = mean; });
    if (!s.ok()) return absl::InternalError(absl::StrCat("group ", g, ": ", s.message()));
  }
  // Unfusion: each layer takes its values of the flat update.
  for (int layer = 0; layer < num_params; ++layer) {
    torch::Tensor& p = params[num_params - 1 - layer];
    absl::Span<const float> values = layout.LayerOf(layer, *buffer);
    p.mutable_grad() = torch::from_blob(const_cast<float*>(values.data()), p.sizes(), torch::kFloat32).clone();
  }
  return absl::OkStatus();
}

// p = fma(-rate, mean, p) at each coordinate the updates carry (checked to
// fit by the caller). INTERNAL, before any change, for parameters that are
// not the layout's contiguous floats.
absl::Status StepInPlace(const std::vector<Update>& updates, const FusionLayout& layout, float scale, double rate,
                         std::vector<torch::Tensor>& params) {
  const int num_params = static_cast<int>(params.size());
  std::vector<float*> data(num_params);
  for (int layer = 0; layer < num_params; ++layer) {
    torch::Tensor& p = params[num_params - 1 - layer];
    if (!p.is_contiguous() || p.scalar_type() != torch::kFloat32 || p.numel() != layout.layer_size(layer)) {
      return absl::InternalError(absl::StrCat("parameter of layer ", layer, " is not ", layout.layer_size(layer),
                                              " contiguous floats"));
    }
    data[layer] = p.data_ptr<float>();
  }
  // torch's SGD: p.add_(grad, -rate), the rate as the tensor's float.
  const float alpha = static_cast<float>(-rate);
  for (int g = 0; g < layout.num_groups(); ++g) {
    const int64_t begin = layout.group(g).begin;
    int layer = layout.LayerAt(begin);
    ForEachMeanValue(updates[g], static_cast<uint64_t>(layout.group_size(g)), scale,
                     [&](uint64_t i, float mean) {
                       const int64_t element = begin + static_cast<int64_t>(i);
                       // Ascending coordinates: the layer only moves forward.
                       while (element >= layout.layer_begin(layer) + layout.layer_size(layer)) ++layer;
                       float& p = data[layer][element - layout.layer_begin(layer)];
                       p = std::fma(alpha, mean, p);
                     })
        .IgnoreError();  // the caller checked that every update fits
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<torch::optim::Optimizer>> MakeOptimizer(const v1::RunConfig& run,
                                                                      const std::vector<torch::Tensor>& params) {
  absl::StatusOr<OptimizerSpec> spec = ParseOptimizerSpec(run.optimizer());
  if (!spec.ok()) return spec.status();
  const double rate = run.learning_rate();
  if (KeepsAdamOnTheWorker(run)) {
    // The updates are Adam's directions already: p -= rate * (mean + wd * p),
    // which without momentum is AdamW's decoupled decay, p *= 1 - rate * wd.
    return std::unique_ptr<torch::optim::Optimizer>(std::make_unique<torch::optim::SGD>(
        params, torch::optim::SGDOptions(rate).weight_decay(
                    spec->kind == OptimizerSpec::Kind::kAdamW ? spec->weight_decay : 0.0)));
  }
  switch (spec->kind) {
    case OptimizerSpec::Kind::kSgd:
      return std::unique_ptr<torch::optim::Optimizer>(std::make_unique<torch::optim::SGD>(
          params, torch::optim::SGDOptions(rate).momentum(
                      MomentumPlaceOf(run) == MomentumPlace::kOptimizer ? run.momentum() : 0.0)));
    case OptimizerSpec::Kind::kAdam:
      return std::unique_ptr<torch::optim::Optimizer>(std::make_unique<torch::optim::Adam>(
          params, torch::optim::AdamOptions(rate)
                      .betas(std::make_tuple(spec->beta1, spec->beta2))
                      .eps(spec->eps)
                      .weight_decay(spec->weight_decay)));
    case OptimizerSpec::Kind::kAdamW:
      return std::unique_ptr<torch::optim::Optimizer>(std::make_unique<torch::optim::AdamW>(
          params, torch::optim::AdamWOptions(rate)
                      .betas(std::make_tuple(spec->beta1, spec->beta2))
                      .eps(spec->eps)
                      .weight_decay(spec->weight_decay)));
  }
  return absl::InternalError("unreachable optimizer kind");
}

void SetLearningRate(torch::optim::Optimizer& optimizer, double rate) {
  for (torch::optim::OptimizerParamGroup& group : optimizer.param_groups()) group.options().set_lr(rate);
}

bool StepsOnlyTheUpdatedCoordinates(const torch::optim::Optimizer& optimizer) {
  const auto* sgd = dynamic_cast<const torch::optim::SGD*>(&optimizer);
  if (sgd == nullptr) return false;
  for (const torch::optim::OptimizerParamGroup& group : sgd->param_groups()) {
    const auto& options = static_cast<const torch::optim::SGDOptions&>(group.options());
    if (options.momentum() != 0 || options.weight_decay() != 0) return false;
  }
  return true;
}

absl::Status ApplyMeanUpdates(const std::vector<Update>& updates, const FusionLayout& layout, uint32_t world,
                              double rate, std::vector<torch::Tensor>& params, torch::optim::Optimizer& optimizer,
                              std::vector<float>* buffer) {
  if (updates.size() != static_cast<size_t>(layout.num_groups())) {
    return absl::InternalError(absl::StrCat(updates.size(), " updates for ", layout.num_groups(), " groups"));
  }
  if (static_cast<int>(params.size()) != layout.num_layers()) {
    return absl::InternalError(absl::StrCat(params.size(), " parameters for ", layout.num_layers(), " layers"));
  }
  // Every update is checked before anything changes.
  for (int g = 0; g < layout.num_groups(); ++g) {
    absl::Status s = ForEachMeanValue(updates[g], static_cast<uint64_t>(layout.group_size(g)), 1.0f,
                                      [](uint64_t, float) {});
    if (!s.ok()) return absl::InternalError(absl::StrCat("group ", g, ": ", s.message()));
  }
  const float scale = MeanScale(world);
  SetLearningRate(optimizer, rate);
  if (StepsOnlyTheUpdatedCoordinates(optimizer)) return StepInPlace(updates, layout, scale, rate, params);
  if (absl::Status s = SetMeanGradients(updates, layout, scale, params, buffer); !s.ok()) return s;
  optimizer.step();
  return absl::OkStatus();
}

}  // namespace sketchfuse
