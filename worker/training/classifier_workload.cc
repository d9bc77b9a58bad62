#include "worker/training/classifier_workload.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "torch/nn/functional.h"
#include "worker/pipeline/step_apply.h"
#include "worker/schemes/scheme_registry.h"

namespace sketchfuse {

namespace {

// The training examples a run uses.
int64_t TrainExamples(const v1::RunConfig& run, int64_t available) {
  return run.train_examples() > 0 ? std::min<int64_t>(run.train_examples(), available) : available;
}

}  // namespace

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

absl::Status ApplyMeanUpdates(const std::vector<Update>& updates, const FusionLayout& layout, uint32_t world,
                              double rate, std::vector<torch::Tensor>& params, torch::optim::SGD& optimizer,
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
  const auto& options = static_cast<const torch::optim::SGDOptions&>(optimizer.param_groups()[0].options());
  if (options.momentum() == 0 && options.weight_decay() == 0) {
    return StepInPlace(updates, layout, scale, rate, params);
  }
  if (absl::Status s = SetMeanGradients(updates, layout, scale, params, buffer); !s.ok()) return s;
  optimizer.step();
  return absl::OkStatus();
}

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

void SetLearningRate(torch::optim::SGD& optimizer, double rate) {
  for (torch::optim::OptimizerParamGroup& group : optimizer.param_groups()) {
    static_cast<torch::optim::SGDOptions&>(group.options()).lr(rate);
  }
}

absl::StatusOr<ImageDataset> TrainShardOf(const v1::RunConfig& run, const ImageDataset& train, uint32_t rank,
                                          uint32_t world) {
  return ShardOf(Head(train, TrainExamples(run, train.size())), rank, world);
}

absl::StatusOr<std::unique_ptr<ClassifierWorkload>> ClassifierWorkload::Create(ClassifierWorkloadConfig config) {
  if (config.ranks.empty() || config.ranks.size() != config.pipelines.size()) {
    return absl::InvalidArgumentError(absl::StrCat("a classifier workload needs a pipeline per participant; got ",
                                                   config.ranks.size(), " ranks and ", config.pipelines.size(),
                                                   " pipelines"));
  }
  if (config.eval_examples < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the curve needs eval_examples >= 1; got ", config.eval_examples));
  }
  std::unique_ptr<ClassifierWorkload> w(new ClassifierWorkload(std::move(config)));
  const v1::RunConfig& run = w->config_.run;
  absl::StatusOr<ImageDataset> train = LoadFashionMnist(w->config_.data_dir, Split::kTrain);
  if (!train.ok()) return train.status();
  absl::StatusOr<ImageDataset> test = LoadFashionMnist(w->config_.data_dir, Split::kTest);
  if (!test.ok()) return test.status();
  for (const uint32_t rank : w->config_.ranks) {
    absl::StatusOr<ImageDataset> shard = TrainShardOf(run, *train, rank, w->config_.world);
    if (!shard.ok()) return shard.status();
    if (shard->size() < static_cast<int64_t>(run.batch_size())) {
      return absl::InvalidArgumentError(absl::StrCat("worker ", rank, "'s shard has ", shard->size(),
                                                     " examples, fewer than a batch of ", run.batch_size()));
    }
    w->train_.push_back(*std::move(shard));
  }
  w->test_ = run.test_examples() > 0 ? Head(*test, run.test_examples()) : *std::move(test);
  w->eval_ = Head(w->test_, std::min<int64_t>(w->config_.eval_examples, w->test_.size()));

  absl::StatusOr<std::shared_ptr<ClassifierImpl>> model = MakeClassifier(run.workload(), run.seed());
  if (!model.ok()) return model.status();
  w->model_ = *model;
  w->params_ = w->model_->parameters();
  w->optimizer_ = std::make_unique<torch::optim::SGD>(
      w->params_, torch::optim::SGDOptions(run.learning_rate())
                      .momentum(MomentumPlaceOf(run) == MomentumPlace::kOptimizer ? run.momentum() : 0.0));

  // Each parameter's gradient enters the pipeline of the participant whose
  // backward pass runs, as soon as autograd has it.
  const int num_params = static_cast<int>(w->params_.size());
  const ClassifierWorkload* self = w.get();
  for (int i = 0; i < num_params; ++i) {
    const int layer = num_params - 1 - i;  // layers are numbered in backward order
    // The parameter vector outlives the hooks (both belong to the workload).
    const torch::Tensor* param = &w->params_[i];
    w->params_[i].register_hook([self, layer, param](torch::Tensor grad) {
      const uint32_t participant = self->current_.load();
      const ClassifierWorkloadConfig& c = self->config_;
      FeedLayer(*c.pipelines[participant], layer, *param, grad,
                layer == 0 && c.inject_nan_gradient_at_step >= 0 && self->current_step_ == c.inject_nan_gradient_at_step &&
                    participant == c.inject_nan_participant);
    });
  }
  return w;
}

absl::StatusOr<double> ClassifierWorkload::Forward(uint32_t participant, int64_t step,
                                                   absl::Span<const int64_t> batch) {
  current_.store(participant);
  current_step_ = step;
  for (torch::Tensor& p : params_) p.mutable_grad() = torch::Tensor();
  const ImageDataset& shard = train_[participant];
  torch::Tensor index =
      torch::from_blob(const_cast<int64_t*>(batch.data()), {static_cast<int64_t>(batch.size())}, torch::kInt64)
          .clone();
  loss_ = torch::nn::functional::cross_entropy(model_->forward(shard.images.index_select(0, index)),
                                               shard.labels.index_select(0, index));
  return loss_.item<double>();
}

absl::Status ClassifierWorkload::Backward(uint32_t participant, int64_t step, StepPipeline&) {
  current_.store(participant);
  current_step_ = step;
  loss_.backward();
  loss_ = torch::Tensor();
  return absl::OkStatus();
}

absl::Status ClassifierWorkload::Apply(const std::vector<Update>& updates, const FusionLayout& layout, uint32_t world,
                                       double rate) {
  torch::NoGradGuard no_grad;
  return ApplyMeanUpdates(updates, layout, world, rate, params_, *optimizer_, &apply_buffer_);
}

std::optional<Evaluation> ClassifierWorkload::Evaluate(bool whole_test_set) {
  return sketchfuse::Evaluate(*model_, whole_test_set ? test_ : eval_, 1000);
}

std::vector<float> ClassifierWorkload::FlatParameters() const {
  std::vector<float> out;
  for (const torch::Tensor& p : params_) {
    torch::Tensor c = p.detach().contiguous();
    out.insert(out.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  return out;
}

}  // namespace sketchfuse
