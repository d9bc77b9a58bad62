#include "worker/training/synthetic_runner.h"

#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/model_profiles.h"
#include "common/synthetic_gradient.h"
#include "worker/pipeline/job_plan.h"
#include "worker/training/learning_rate.h"
#include "worker/training/step_loop.h"

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

namespace {

// A synthetic profile as a step loop's workload: no data, no loss, no model
// to update; the backward pass is modelled (each layer's gradient appears
// after its time) and feeds the drawn gradient.
class SyntheticWorkload final : public Workload {
 public:
  SyntheticWorkload(const std::vector<int64_t>& layer_offsets, const std::vector<int64_t>& layer_sizes,
                    const std::vector<absl::Duration>& layer_backward, const std::vector<float>& gradient,
                    const DeviceArray& device_gradient, const std::vector<float>& parameters)
      : offsets_(layer_offsets),
        sizes_(layer_sizes),
        backward_(layer_backward),
        gradient_(gradient),
        device_gradient_(device_gradient),
        parameters_(parameters) {}

  int64_t examples(uint32_t) const override { return 0; }
  int loss_classes() const override { return 0; }
  absl::StatusOr<double> Forward(uint32_t, int64_t, absl::Span<const int64_t>) override { return 0.0; }
  absl::Status Backward(uint32_t, int64_t, StepPipeline& pipeline) override {
    for (size_t l = 0; l < sizes_.size(); ++l) {
      absl::SleepFor(backward_[l]);
      if (!parameters_.empty()) {
        pipeline.AddLayerParameters(static_cast<int>(l), absl::MakeConstSpan(parameters_.data() + offsets_[l], sizes_[l]))
            .IgnoreError();  // a misfit fails the step in AddLayerGradient
      }
      const GradientView grad =
          device_gradient_.size() > 0
              ? device_gradient_.view(offsets_[l], sizes_[l])
              : GradientView(absl::MakeConstSpan(gradient_.data() + offsets_[l], sizes_[l]));
      if (absl::Status s = pipeline.AddLayerGradient(static_cast<int>(l), grad); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  // No model takes the update; the loop still settles the residuals on the
  // run's schedule, as a trainer's are.
  absl::Status Apply(const std::vector<Update>&, const FusionLayout&, uint32_t, double) override {
    return absl::OkStatus();
  }
  std::optional<Evaluation> Evaluate(bool) override { return std::nullopt; }

 private:
  const std::vector<int64_t>& offsets_;
  const std::vector<int64_t>& sizes_;
  const std::vector<absl::Duration>& backward_;
  const std::vector<float>& gradient_;
  const DeviceArray& device_gradient_;
  const std::vector<float>& parameters_;
};

}  // namespace

absl::StatusOr<TrainingSummary> SyntheticRunner::Run(const std::function<void(const Progress&)>& progress) {
  const v1::JobConfig& job = config_.joined.job();
  SyntheticWorkload workload(layer_offsets_, layer_sizes_, layer_backward_, gradient_, device_gradient_,
                             parameters_);
  StepLoopConfig loop;
  loop.run = job.run();
  loop.world = job.world_size();
  loop.report_every = config_.report_every;
  loop.on_step = [this](int64_t step, const StepReport& report, absl::Time apply_begin, absl::Time apply_end) {
    if (trace_ != nullptr && step < config_.trace_steps) {
      AddStepToTrace(step, pipeline_->timeline(), apply_begin, apply_end, trace_.get());
    }
    if (config_.on_step) config_.on_step(report);
  };
  loop.at_end = [this](int64_t) { return trace_ != nullptr ? trace_->WriteFile(config_.trace_path) : absl::OkStatus(); };
  Participants participants{{pipeline_.get()}, {scheme_}, {config_.joined.rank()}};
  return RunStepLoop(workload, participants, loop, progress);
}

}  // namespace sketchfuse
