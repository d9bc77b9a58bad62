#include "worker/training/torch_workload.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "torch/autograd.h"
#include "worker/training/optimizer.h"

namespace sketchfuse {

void FeedLayer(StepPipeline& sink, int layer, const torch::Tensor& param, const torch::Tensor& grad,
               bool inject_nan) {
  torch::Tensor g = grad.detach().contiguous();
  if (inject_nan) {
    g = g.clone();
    g.view(-1)[0] = std::numeric_limits<float>::quiet_NaN();
  }
  if (sink.needs_parameters()) {
    torch::Tensor w = param.detach().contiguous();
    sink.AddLayerParameters(layer, absl::MakeConstSpan(w.data_ptr<float>(), w.numel())).IgnoreError();
  }
  sink.AddLayerGradient(layer, absl::MakeConstSpan(g.data_ptr<float>(), g.numel())).IgnoreError();
}

absl::Status TorchWorkload::Init(std::vector<torch::Tensor> params) {
  if (config_.ranks.empty() || config_.ranks.size() != config_.pipelines.size()) {
    return absl::InvalidArgumentError(absl::StrCat("a workload needs a pipeline per participant; got ",
                                                   config_.ranks.size(), " ranks and ", config_.pipelines.size(),
                                                   " pipelines"));
  }
  params_ = std::move(params);
  absl::StatusOr<std::unique_ptr<torch::optim::Optimizer>> optimizer = MakeOptimizer(config_.run, params_);
  if (!optimizer.ok()) return optimizer.status();
  optimizer_ = *std::move(optimizer);
  // Each parameter's gradient enters the pipeline of the participant whose
  // backward pass runs, as soon as autograd has it.
  const int num_params = static_cast<int>(params_.size());
  for (int i = 0; i < num_params; ++i) {
    const int layer = num_params - 1 - i;  // layers are numbered in backward order
    // The parameter vector outlives the hooks (both belong to the workload).
    const torch::Tensor* param = &params_[i];
    params_[i].register_hook([this, layer, param](torch::Tensor grad) {
      const uint32_t participant = current_.load();
      const TorchWorkloadConfig& c = config_;
      FeedLayer(*c.pipelines[participant], layer, *param, grad,
                layer == 0 && c.inject_nan_gradient_at_step >= 0 && current_step_ == c.inject_nan_gradient_at_step &&
                    participant == c.inject_nan_participant);
    });
  }
  return absl::OkStatus();
}

void TorchWorkload::BeginForward(uint32_t participant, int64_t step) {
  current_.store(participant);
  current_step_ = step;
  for (torch::Tensor& p : params_) p.mutable_grad() = torch::Tensor();
}

absl::Status TorchWorkload::Backward(uint32_t participant, int64_t step, StepPipeline&) {
  current_.store(participant);
  current_step_ = step;
  loss_.backward();
  loss_ = torch::Tensor();
  return absl::OkStatus();
}

absl::Status TorchWorkload::Apply(const std::vector<Update>& updates, const FusionLayout& layout, uint32_t world,
                                  double rate) {
  torch::NoGradGuard no_grad;
  return ApplyMeanUpdates(updates, layout, world, rate, params_, *optimizer_, &apply_buffer_);
}

std::vector<float> TorchWorkload::FlatParameters() const {
  std::vector<float> out;
  for (const torch::Tensor& p : params_) {
    torch::Tensor c = p.detach().contiguous();
    out.insert(out.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  return out;
}

}  // namespace sketchfuse
