#include "worker/training/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/run_config.h"
#include "torch/nn/functional.h"
#include "torch/optim/sgd.h"
#include "torch/serialize.h"
#include "worker/pipeline/job_plan.h"
#include "worker/pipeline/step_apply.h"
#include "worker/training/epoch_order.h"
#include "worker/training/workloads.h"
#include "worker/compression/group_compressors.h"
#include "worker/training/checkpoint_state.h"
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

Evaluation TimedEvaluate(ClassifierImpl& model, const ImageDataset& data, double* seconds) {
  const absl::Time start = absl::Now();
  const Evaluation eval = Evaluate(model, data, 1000);
  *seconds += absl::ToDoubleSeconds(absl::Now() - start);
  return eval;
}

CurvePoint CurvePointAfter(int64_t steps, const StepStats& stats, ClassifierImpl& model, const ImageDataset& data,
                           double* eval_seconds) {
  CurvePoint point;
  point.step = steps;
  point.elapsed_seconds = stats.ElapsedSeconds();
  point.bytes_sent = stats.total_bytes_sent();
  const Evaluation eval = TimedEvaluate(model, data, eval_seconds);
  point.test_accuracy = eval.accuracy;
  point.test_loss = eval.loss;
  return point;
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

struct Trainer::State {
  TrainerConfig config;
  v1::RunConfig run;
  uint32_t rank = 0, world = 1;
  AggregationScheme* scheme = nullptr;
  std::shared_ptr<ClassifierImpl> model;
  std::vector<torch::Tensor> params;  // forward order
  std::unique_ptr<torch::optim::SGD> optimizer;
  ImageDataset train, test;
  ImageDataset eval;  // the curve's fixed subset of the test set
  int64_t first_step = 0;  // from the checkpoint
  std::vector<float> apply_buffer;
  absl::Time apply_begin, apply_end;  // of the last step
  int64_t current_step = -1;  // set before each backward pass; read by the hooks it runs
  std::unique_ptr<TraceWriter> trace;  // when config.trace_path is set
};

Trainer::Trainer(std::unique_ptr<State> state) : state_(std::move(state)) {}

// The hooks on the parameters point at the pipeline; both die with the
// trainer, and no backward pass runs during destruction.
Trainer::~Trainer() = default;

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(TrainerConfig config, AggregationScheme* scheme) {
  auto state = std::make_unique<State>();
  state->run = config.joined.job().run();
  state->rank = config.joined.rank();
  state->world = config.joined.world_size();
  state->scheme = scheme;
  state->config = std::move(config);
  const v1::RunConfig& run = state->run;
  if (state->world == 0 || state->rank >= state->world) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", state->rank, " of ", state->world, " workers"));
  }
  // The run the job describes must be the one this build derives.
  v1::RunConfig derived = run;
  if (absl::Status s = DescribeRun(state->world, &derived); !s.ok()) return s;
  if (RunFingerprint(derived) != RunFingerprint(run)) {
    return absl::InvalidArgumentError(absl::StrCat("the job's run does not match the model this worker builds: ",
                                                   DiffRunConfigs(run, derived)));
  }
  absl::StatusOr<ImageDataset> train = LoadFashionMnist(state->config.data_dir, Split::kTrain);
  if (!train.ok()) return train.status();
  absl::StatusOr<ImageDataset> test = LoadFashionMnist(state->config.data_dir, Split::kTest);
  if (!test.ok()) return test.status();
  absl::StatusOr<ImageDataset> shard = TrainShardOf(run, *train, state->rank, state->world);
  if (!shard.ok()) return shard.status();
  state->train = *std::move(shard);
  state->test = run.test_examples() > 0 ? Head(*test, run.test_examples()) : *std::move(test);
  if (state->config.eval_every < 0 || state->config.eval_examples < 1) {
    return absl::InvalidArgumentError(absl::StrCat("the curve needs eval_every >= 0 and eval_examples >= 1; got ",
                                                   state->config.eval_every, " and ",
                                                   state->config.eval_examples));
  }
  state->eval = Head(state->test, std::min<int64_t>(state->config.eval_examples, state->test.size()));

  absl::StatusOr<std::shared_ptr<ClassifierImpl>> model = MakeClassifier(run.workload(), run.seed());
  if (!model.ok()) return model.status();
  state->model = *model;
  state->params = state->model->parameters();
  state->optimizer = std::make_unique<torch::optim::SGD>(
      state->params, torch::optim::SGDOptions(run.learning_rate())
                          .momentum(MomentumPlaceOf(run) == MomentumPlace::kOptimizer ? run.momentum() : 0.0));

  std::vector<int64_t> layer_sizes(run.layer_sizes().begin(), run.layer_sizes().end());
  std::unique_ptr<Trainer> trainer(new Trainer(std::move(state)));
  absl::StatusOr<std::unique_ptr<StepPipeline>> pipeline =
      StepPipeline::Create(layer_sizes, GroupLayouts(trainer->state_->config.joined.job()), scheme);
  if (!pipeline.ok()) return pipeline.status();
  trainer->pipeline_ = *std::move(pipeline);

  // Each parameter's gradient enters the pipeline as soon as autograd has it.
  const int num_params = static_cast<int>(trainer->state_->params.size());
  StepPipeline* sink = trainer->pipeline_.get();
  for (int i = 0; i < num_params; ++i) {
    const int layer = num_params - 1 - i;  // layers are numbered in backward order
    // The parameter vector outlives the hooks (both belong to the trainer).
    const torch::Tensor* param = &trainer->state_->params[i];
    const State* state = trainer->state_.get();
    trainer->state_->params[i].register_hook([sink, layer, param, state](torch::Tensor grad) {
      FeedLayer(*sink, layer, *param, grad,
                layer == 0 && state->config.inject_nan_gradient_at_step >= 0 &&
                    state->current_step == state->config.inject_nan_gradient_at_step);
    });
  }
  if (!trainer->state_->config.trace_path.empty()) {
    State& s = *trainer->state_;
    if (s.config.trace_steps < 1) return absl::InvalidArgumentError("the timeline must cover at least one step");
    s.trace = PipelineTraceWriter(static_cast<int>(s.rank), trainer->pipeline_->num_groups());
    // Fail now, not after training, if the file cannot be written.
    if (absl::Status st = s.trace->WriteFile(s.config.trace_path); !st.ok()) return st;
  }
  if (!trainer->state_->config.checkpoint_path.empty()) {
    absl::StatusOr<int64_t> resumed = trainer->LoadCheckpoint();
    if (!resumed.ok()) return resumed.status();
    trainer->state_->first_step = *resumed;
  }
  return trainer;
}

absl::Status Trainer::TrainStep(int64_t step, const torch::Tensor& images, const torch::Tensor& labels,
                                double* loss_out) {
  State& s = *state_;
  pipeline_->BeginStep(static_cast<uint64_t>(step));
  s.current_step = step;
  for (torch::Tensor& p : s.params) p.mutable_grad() = torch::Tensor();
  torch::Tensor loss = torch::nn::functional::cross_entropy(s.model->forward(images), labels);
  *loss_out = loss.item<double>();
  // Before any gradient of this step reaches the pipeline.
  if (absl::Status sane = CheckLoss(step, *loss_out, kNumClasses); !sane.ok()) return sane;
  loss.backward();
  pipeline_->MarkBackwardEnd();
  absl::StatusOr<std::vector<Update>> updates = pipeline_->FinishStep();
  if (!updates.ok()) return updates.status();
  // Every worker holds the same updates, so all of them stop at this step.
  for (int g = 0; g < pipeline_->num_groups(); ++g) {
    if (absl::Status finite = CheckFiniteValues("update", step, g, (*updates)[g].values); !finite.ok()) return finite;
  }
  s.apply_begin = absl::Now();

  torch::NoGradGuard no_grad;
  if (absl::Status set = ApplyMeanUpdates(*updates, pipeline_->layout(), s.world, LearningRateAt(s.run, s.world, step),
                                          s.params, *s.optimizer, &s.apply_buffer);
      !set.ok()) {
    return set;
  }
  absl::Status applied = pipeline_->Applied(*updates, ResidualRescaleAfter(s.run, s.world, step));
  s.apply_end = absl::Now();
  return applied;
}

void Trainer::TraceStep(int64_t step) {
  State& s = *state_;
  if (s.trace == nullptr || step >= s.first_step + s.config.trace_steps) return;
  AddStepToTrace(step, pipeline_->timeline(), s.apply_begin, s.apply_end, s.trace.get());
}

absl::StatusOr<TrainingSummary> Trainer::Run(const std::function<void(const Progress&)>& progress) {
  State& s = *state_;
  const int64_t steps_per_epoch = s.run.steps_per_epoch();
  const int64_t total_steps = steps_per_epoch * s.run.epochs();
  const int64_t batch = s.run.batch_size();
  TrainingSummary summary;
  summary.resumed_from_step = s.first_step;
  StepStats stats(absl::Now());
  double eval_seconds = 0;
  auto residual_norm = [&] { return ResidualNormOf(s.scheme->SaveState()); };

  std::vector<int64_t> order;
  for (int64_t step = s.first_step; step < total_steps; ++step) {
    const int64_t epoch = step / steps_per_epoch;
    const int64_t in_epoch = step % steps_per_epoch;
    if (in_epoch == 0 || step == s.first_step) {
      order = EpochOrder(s.run.seed(), static_cast<int>(s.rank), epoch, s.train.size());
    }
    torch::Tensor index =
        torch::from_blob(order.data() + in_epoch * batch, {batch}, torch::kInt64).clone();
    const absl::Time step_start = absl::Now();
    double loss = 0;
    try {
      if (absl::Status st = TrainStep(step, s.train.images.index_select(0, index),
                                      s.train.labels.index_select(0, index), &loss);
          !st.ok()) {
        std::optional<Divergence> diverged = DivergenceBehind(st, s.config.posted_divergence, s.config.worker_id);
        if (!diverged.has_value()) return absl::Status(st.code(), absl::StrCat("step ", step, ": ", st.message()));
        // The run ends here, with the steps done; nothing is checkpointed
        // (the last checkpoint holds a model from before the divergence).
        summary.diverged = std::move(diverged);
        summary.final_test_accuracy = std::numeric_limits<double>::quiet_NaN();
        summary.eval_seconds = eval_seconds;
        stats.Summarize(step, &summary);
        if (s.trace != nullptr) s.trace->WriteFile(s.config.trace_path).IgnoreError();  // best effort
        return summary;
      }
    } catch (const c10::Error& e) {
      return absl::InternalError(absl::StrCat("step ", step, ": LibTorch: ", e.what_without_backtrace()));
    }
    const double seconds = absl::ToDoubleSeconds(absl::Now() - step_start);
    TraceStep(step);
    const StepReport report = stats.Add(step, seconds, loss, pipeline_->traffic(), PhasesOf(pipeline_->timeline()));
    if (s.config.on_step) s.config.on_step(report);
    // The curve: after every eval_every steps and after the last one.
    const int every = s.config.eval_every;
    if (every > 0 && ((step + 1) % every == 0 || step + 1 == total_steps)) {
      summary.curve.push_back(CurvePointAfter(step + 1, stats, *s.model, s.eval, &eval_seconds));
    }

    const bool checkpoint_due = !s.config.checkpoint_path.empty() && s.config.checkpoint_every > 0 &&
                                (step + 1) % s.config.checkpoint_every == 0;
    if (checkpoint_due) {
      if (absl::Status st = SaveCheckpoint(step + 1); !st.ok()) return st;
    }
    if (in_epoch + 1 == steps_per_epoch) {
      Progress p = stats.TakeWindow(step, static_cast<int>(epoch + 1), residual_norm());
      p.peel_recovered_share = PeelRecoveredShare(*s.scheme);
      p.end_of_epoch = true;
      const Evaluation eval = TimedEvaluate(*s.model, s.test, &eval_seconds);
      p.test_accuracy = eval.accuracy;
      p.test_loss = eval.loss;
      summary.epochs.push_back(p);
      if (progress) progress(p);
    } else if (s.config.report_every > 0 && (step + 1) % s.config.report_every == 0) {
      Progress p = stats.TakeWindow(step, static_cast<int>(epoch + 1), residual_norm());
      p.peel_recovered_share = PeelRecoveredShare(*s.scheme);
      if (progress) progress(p);
    }
  }
  if (!s.config.checkpoint_path.empty()) {
    if (absl::Status st = SaveCheckpoint(total_steps); !st.ok()) return st;
  }
  if (s.trace != nullptr) {
    if (absl::Status st = s.trace->WriteFile(s.config.trace_path); !st.ok()) return st;
  }
  stats.Summarize(total_steps, &summary);
  summary.peel_recovered_share = PeelRecoveredShare(*s.scheme);
  summary.eval_seconds = eval_seconds;
  summary.final_test_accuracy = Evaluate(*s.model, s.test, 1000).accuracy;
  AddEndOfRunWarnings(kNumClasses, &summary);
  return summary;
}

std::vector<float> Trainer::FlatParameters() const {
  std::vector<float> out;
  for (const torch::Tensor& p : state_->params) {
    torch::Tensor c = p.detach().contiguous();
    out.insert(out.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  return out;
}

absl::Status Trainer::SaveCheckpoint(int64_t next_step) const {
  const State& s = *state_;
  const std::string tmp = s.config.checkpoint_path + ".tmp";
  try {
    torch::serialize::OutputArchive archive;
    archive.write("next_step", torch::tensor({next_step}, torch::kInt64));
    const std::string fingerprint = RunFingerprint(s.run);
    archive.write("fingerprint",
                  torch::from_blob(const_cast<char*>(fingerprint.data()), {static_cast<int64_t>(fingerprint.size())},
                                   torch::kUInt8).clone());
    archive.write("rank", torch::tensor({static_cast<int64_t>(s.rank)}, torch::kInt64));
    for (size_t i = 0; i < s.params.size(); ++i) archive.write(absl::StrCat("param_", i), s.params[i].detach());
    torch::serialize::OutputArchive optimizer;
    s.optimizer->save(optimizer);
    archive.write("optimizer", optimizer);
    WriteGroupStates(s.scheme->SaveState(), archive);
    archive.save_to(tmp);
  } catch (const c10::Error& e) {
    return absl::DataLossError(absl::StrCat("cannot write checkpoint '", tmp, "': ", e.what_without_backtrace()));
  }
  if (std::rename(tmp.c_str(), s.config.checkpoint_path.c_str()) != 0) {
    return absl::DataLossError(absl::StrCat("cannot rename '", tmp, "' to '", s.config.checkpoint_path, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Trainer::LoadCheckpoint() {
  State& s = *state_;
  const std::string& path = s.config.checkpoint_path;
  if (!std::ifstream(path).good()) return 0;  // nothing to resume
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(path);
    torch::Tensor fingerprint, rank, next_step;
    archive.read("fingerprint", fingerprint);
    const std::string saved(reinterpret_cast<const char*>(fingerprint.data_ptr<uint8_t>()), fingerprint.numel());
    if (saved != RunFingerprint(s.run)) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint '", path, "' belongs to run ", saved,
                                                     ", not to this run ", RunFingerprint(s.run)));
    }
    archive.read("rank", rank);
    if (rank.item<int64_t>() != s.rank) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint '", path, "' is rank ", rank.item<int64_t>(),
                                                     "'s; this worker is rank ", s.rank));
    }
    archive.read("next_step", next_step);
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < s.params.size(); ++i) {
      torch::Tensor saved_param;
      archive.read(absl::StrCat("param_", i), saved_param);
      if (!saved_param.sizes().equals(s.params[i].sizes())) {
        return absl::InvalidArgumentError(absl::StrCat("checkpoint '", path, "': parameter ", i, " has another shape"));
      }
      s.params[i].copy_(saved_param);
    }
    torch::serialize::InputArchive optimizer;
    archive.read("optimizer", optimizer);
    s.optimizer->load(optimizer);
    const int64_t total_steps = static_cast<int64_t>(s.run.steps_per_epoch()) * s.run.epochs();
    if (next_step.item<int64_t>() < 0 || next_step.item<int64_t>() > total_steps) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint '", path, "' resumes at step ",
                                                     next_step.item<int64_t>(), ", outside this run's 0..",
                                                     total_steps));
    }
    absl::StatusOr<std::vector<GroupState>> state = ReadGroupStates(archive, s.scheme->SaveState());
    if (!state.ok()) return absl::InvalidArgumentError(absl::StrCat("checkpoint '", path, "': ", state.status().message()));
    if (absl::Status st = s.scheme->RestoreState(*state); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint '", path, "': ", st.message()));
    }
    return next_step.item<int64_t>();
  } catch (const c10::Error& e) {
    return absl::DataLossError(absl::StrCat("cannot read checkpoint '", path, "': ", e.what_without_backtrace()));
  }
}

}  // namespace sketchfuse
