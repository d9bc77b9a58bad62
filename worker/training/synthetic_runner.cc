#include "worker/training/synthetic_runner.h"

#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/model_profiles.h"
#include "common/synthetic_gradient.h"
#include "worker/pipeline/job_plan.h"
#include "worker/training/learning_rate.h"

namespace sketchfuse {

absl::Status DescribeSyntheticRun(v1::RunConfig* run) {
  absl::StatusOr<ModelProfile> profile = ModelProfileByName(run->workload());
  if (!profile.ok()) return profile.status();
  if (run->synthetic_steps() == 0) return absl::InvalidArgumentError("a synthetic workload needs steps (>= 1)");
  if (!(run->backward_ns_per_element() >= 0) || !std::isfinite(run->backward_ns_per_element())) {
    return absl::InvalidArgumentError(
        absl::StrCat("the backward time per element must be >= 0; got ", run->backward_ns_per_element()));
  }
  run->clear_layer_sizes();
  for (const TensorSpec& tensor : profile->BackwardOrder()) {
    run->add_layer_sizes(static_cast<uint64_t>(tensor.num_elements));
  }
  run->set_steps_per_epoch(run->synthetic_steps());
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SyntheticRunner>> SyntheticRunner::Create(SyntheticConfig config,
                                                                          AggregationScheme* scheme) {
  std::unique_ptr<SyntheticRunner> runner(new SyntheticRunner(std::move(config), scheme));
  const v1::RunConfig& run = runner->config_.joined.job().run();
  absl::StatusOr<ModelProfile> profile = ModelProfileByName(run.workload());
  if (!profile.ok()) return profile.status();
  const uint32_t rank = runner->config_.joined.rank();
  const std::vector<TensorSpec> layers = profile->BackwardOrder();
  if (static_cast<int>(layers.size()) != run.layer_sizes_size()) {
    return absl::InvalidArgumentError(absl::StrCat("the run has ", run.layer_sizes_size(), " layers; ", run.workload(),
                                                   " has ", layers.size()));
  }
  int64_t offset = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    if (static_cast<uint64_t>(layers[l].num_elements) != run.layer_sizes(l)) {
      return absl::InvalidArgumentError(absl::StrCat("layer ", l, " of the run has ", run.layer_sizes(l),
                                                     " elements; ", run.workload(), "'s has ", layers[l].num_elements));
    }
    runner->layer_offsets_.push_back(offset);
    runner->layer_sizes_.push_back(layers[l].num_elements);
    offset += layers[l].num_elements;
  }
  for (const LayerTiming& timing : SyntheticLayerTimings(*profile, 1e-9 * run.backward_ns_per_element(), 20e-6)) {
    runner->layer_backward_.push_back(absl::Seconds(timing.backward_seconds));
  }
  runner->gradient_ = SyntheticGradient(*profile, run.seed() * 1000003ull + rank);
  if (scheme->needs_parameters()) {
    // Parameter magnitudes of a trained network: most around 0.02, a few near 0.
    std::mt19937_64 rng(run.seed() + 17);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    runner->parameters_.resize(runner->gradient_.size());
    for (float& w : runner->parameters_) w = normal(rng);
  }
  StepPipeline::BufferFactory buffers;  // host by default
  if (run.device() == "gpu") {
    absl::StatusOr<DeviceArray> uploaded = DeviceArray::Upload(runner->gradient_);
    if (!uploaded.ok()) return uploaded.status();
    runner->device_gradient_ = *std::move(uploaded);
    runner->gradient_ = {};
    buffers = MakeDeviceFusionBuffers;
  }
  absl::StatusOr<std::unique_ptr<StepPipeline>> pipeline =
      // The gradient is drawn once and finite (common/synthetic_gradient.h):
      // no per-step check for NaN and infinity.
      StepPipeline::Create(runner->layer_sizes_, GroupLayouts(runner->config_.joined.job()), scheme, buffers,
                           /*check_gradients=*/false);
  if (!pipeline.ok()) return pipeline.status();
  runner->pipeline_ = *std::move(pipeline);
  if (!runner->config_.trace_path.empty()) {
    if (runner->config_.trace_steps < 1) return absl::InvalidArgumentError("the timeline must cover at least one step");
    runner->trace_ = PipelineTraceWriter(static_cast<int>(rank), runner->pipeline_->num_groups());
    if (absl::Status s = runner->trace_->WriteFile(runner->config_.trace_path); !s.ok()) return s;
  }
  return runner;
}

absl::Status SyntheticRunner::Step(int64_t step) {
  pipeline_->BeginStep(static_cast<uint64_t>(step));
  // The modelled backward pass: each layer's gradient appears after its time.
  for (size_t l = 0; l < layer_sizes_.size(); ++l) {
    absl::SleepFor(layer_backward_[l]);
    if (!parameters_.empty()) {
      pipeline_->AddLayerParameters(static_cast<int>(l), absl::MakeConstSpan(parameters_.data() + layer_offsets_[l],
                                                                             layer_sizes_[l]))
          .IgnoreError();  // a misfit fails the step in AddLayerGradient
    }
    const GradientView grad =
        device_gradient_.size() > 0
            ? device_gradient_.view(layer_offsets_[l], layer_sizes_[l])
            : GradientView(absl::MakeConstSpan(gradient_.data() + layer_offsets_[l], layer_sizes_[l]));
    if (absl::Status s = pipeline_->AddLayerGradient(static_cast<int>(l), grad); !s.ok()) {
      return s;
    }
  }
  pipeline_->MarkBackwardEnd();
  absl::StatusOr<std::vector<Update>> updates = pipeline_->FinishStep();
  if (!updates.ok()) return updates.status();
  apply_begin_ = absl::Now();
  // No model takes a rate here, but the residuals follow the run's schedule
  // as a trainer's do.
  const v1::JobConfig& job = config_.joined.job();
  absl::Status applied = pipeline_->Applied(*updates, ResidualRescaleAfter(job.run(), job.world_size(), step));
  apply_end_ = absl::Now();
  return applied;
}

absl::StatusOr<TrainingSummary> SyntheticRunner::Run(const std::function<void(const Progress&)>& progress) {
  const v1::RunConfig& run = config_.joined.job().run();
  const int64_t steps_per_epoch = run.steps_per_epoch();
  const int64_t total_steps = steps_per_epoch * run.epochs();
  TrainingSummary summary;
  StepStats stats(absl::Now());
  auto residual_norm = [&] { return ResidualNormOf(scheme_->SaveState()); };
  for (int64_t step = 0; step < total_steps; ++step) {
    const absl::Time step_start = absl::Now();
    if (absl::Status s = Step(step); !s.ok()) return absl::Status(s.code(), absl::StrCat("step ", step, ": ", s.message()));
    const double seconds = absl::ToDoubleSeconds(absl::Now() - step_start);
    if (trace_ != nullptr && step < config_.trace_steps) {
      AddStepToTrace(step, pipeline_->timeline(), apply_begin_, apply_end_, trace_.get());
    }
    const StepReport report = stats.Add(step, seconds, 0.0, pipeline_->traffic(), PhasesOf(pipeline_->timeline()));
    if (config_.on_step) config_.on_step(report);
    const int epoch = static_cast<int>(step / steps_per_epoch) + 1;
    if ((step + 1) % steps_per_epoch == 0) {
      Progress p = stats.TakeWindow(step, epoch, residual_norm());
      p.end_of_epoch = true;
      summary.epochs.push_back(p);
      if (progress) progress(p);
    } else if (config_.report_every > 0 && (step + 1) % config_.report_every == 0) {
      if (progress) progress(stats.TakeWindow(step, epoch, residual_norm()));
    }
  }
  if (trace_ != nullptr) {
    if (absl::Status s = trace_->WriteFile(config_.trace_path); !s.ok()) return s;
  }
  stats.Summarize(total_steps, &summary);
  summary.peel_recovered_share = PeelRecoveredShare(*scheme_);
  summary.final_test_accuracy = -1;  // no test set
  AddEndOfRunWarnings(/*classes=*/0, &summary);
  return summary;
}

}  // namespace sketchfuse
