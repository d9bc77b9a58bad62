// Throughput runs on a synthetic profile of a large model (resnet50, vgg16,
// bert_base, gpt2_small): the model's real layer sizes in backward order,
// heavy-tailed gradient values (common/synthetic_gradient.h) and a modelled
// backward time per layer, fed through the same step pipeline and schemes as
// real training. The backward pass is modelled as time spent on an
// accelerator: each layer's gradient appears after `20 us + n *
// backward_ns_per_element` of sleep, so the host's cores stay free for
// compression and communication, as they would be beside a GPU.
//
// Each worker draws its gradient once (seed and rank) and reuses it every
// step: the values shape compression cost and ratio, and regenerating 25-138M
// heavy-tailed values per step would cost more than the step itself. There is
// no model to update and no accuracy; the report is time and traffic. A
// participant of the step loop (worker/training/step_loop.h), whose workload
// here has no data, loss or model.
//
// With run.device "gpu" the gradient is uploaded to the GPU once, the fusion
// buffers are device memory, and the scheme's groups are encoded and decoded
// there (worker/compression/group_compressors.h): what a GPU worker's step costs beside
// its backward pass.
#ifndef SKETCHFUSE_WORKER_TRAINING_SYNTHETIC_RUNNER_H_
#define SKETCHFUSE_WORKER_TRAINING_SYNTHETIC_RUNNER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/coordinator.pb.h"
#include "worker/schemes/aggregation_scheme.h"
#include "worker/gpu/device_memory.h"
#include "worker/pipeline/step_pipeline.h"
#include "worker/pipeline/step_stats.h"
#include "worker/pipeline/trace_writer.h"

namespace sketchfuse {

// Fills a synthetic-profile run's layer sizes (the profile's, in backward
// order) and steps per epoch (its synthetic_steps). INVALID_ARGUMENT for a
// workload that is not a profile, no steps, or a negative or non-finite
// backward time.
absl::Status DescribeSyntheticRun(v1::RunConfig* run);

struct SyntheticConfig {
  v1::JoinReply joined;
  int report_every = 0;
  std::string trace_path;
  int trace_steps = 50;
  std::function<void(const StepReport&)> on_step;
};

class SyntheticRunner {
 public:
  // INVALID_ARGUMENT for a workload that is not a synthetic profile or a run
  // whose layers are not the profile's.
  static absl::StatusOr<std::unique_ptr<SyntheticRunner>> Create(SyntheticConfig config, AggregationScheme* scheme);

  // Runs the run's steps; `progress` gets every report.
  absl::StatusOr<TrainingSummary> Run(const std::function<void(const Progress&)>& progress);

  const StepPipeline& pipeline() const { return *pipeline_; }

 private:
  SyntheticRunner(SyntheticConfig config, AggregationScheme* scheme) : config_(std::move(config)), scheme_(scheme) {}

  SyntheticConfig config_;
  AggregationScheme* scheme_;
  std::unique_ptr<StepPipeline> pipeline_;
  std::vector<int64_t> layer_offsets_;      // into gradient_, backward order
  std::vector<int64_t> layer_sizes_;
  std::vector<absl::Duration> layer_backward_;
  std::vector<float> gradient_;             // the whole model, backward order (host)
  DeviceArray device_gradient_;             // the same on the GPU (device "gpu")
  std::vector<float> parameters_;           // for importance selection
  std::unique_ptr<TraceWriter> trace_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_TRAINING_SYNTHETIC_RUNNER_H_
