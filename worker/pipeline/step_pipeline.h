// The per-step gradient pipeline of a worker, independent of the model
// library: layer gradients are copied into their group's fusion buffer as the
// backward pass produces them; a group whose last layer arrives is handed to
// the communication thread, which runs the scheme's exchange (compress and
// push, or compress and allreduce) while the backward pass goes on with the
// other layers. Groups are exchanged in plan order, the same on every worker
// (collectives match by order): a group ready early waits for those before
// it. A step ends when every group's update has arrived and the scheme has
// reconciled the step (AggregationScheme::Reconcile).
//
// Layers are numbered in backward order (layer 0 is the first whose gradient
// is ready), and the groups are contiguous ranges of the flat gradient
// (worker/pipeline/fusion_layout.h): fused layers, or the partitions a job
// cuts them into; a group is ready when every layer with a piece in it is.
//
// Divergence: a group's fused gradient is checked for NaN and infinity just
// before the scheme gets it (host buffers; device buffers are not read on the
// host). A non-finite gradient is never exchanged: the pipeline aborts with
// the divergence (worker/core/divergence.h), as Abort describes.
//
// Thread-safety: AddLayerGradient may be called from any thread (autograd
// hooks), Abort from any thread; BeginStep, MarkBackwardEnd, FinishStep and
// Applied from one.
#ifndef SKETCHFUSE_WORKER_PIPELINE_STEP_PIPELINE_H_
#define SKETCHFUSE_WORKER_PIPELINE_STEP_PIPELINE_H_

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "worker/schemes/aggregation_scheme.h"
#include "worker/pipeline/fusion_buffers.h"
#include "worker/pipeline/fusion_layout.h"
#include "worker/core/gradient_view.h"

namespace sketchfuse {

// What happened when, in one step, in the order it happened (seq).
struct PipelineEvent {
  enum class Kind { kGroupReady, kExchangeStart, kExchangeSent, kUpdateReceived, kBackwardEnd };
  Kind kind;
  int group = -1;  // -1 for kBackwardEnd
  int64_t seq = 0;
  absl::Time time;
};

const char* PipelineEventName(PipelineEvent::Kind kind);

// Where one step's time went: the backward pass, and each group's exchange.
struct StepTimeline {
  absl::Time begin;         // BeginStep
  absl::Time backward_end;  // MarkBackwardEnd
  std::vector<std::vector<TraceSpan>> groups;  // each group's spans (empty if it failed)
  std::vector<std::string> routes;             // each group's route ("" if it failed)
};

struct StepTraffic {
  size_t bytes_sent = 0;
  size_t bytes_received = 0;
  size_t dense_bytes = 0;
  // Groups whose update came over the workers' collectives.
  int collective_groups = 0;
};

class StepPipeline {
 public:
  // INVALID_ARGUMENT unless the groups tile the flat gradient in order and every
  // layer size is positive (FusionLayout::Create). `make_buffers` makes the fusion buffers for the
  // group sizes (default: host memory; a GPU worker's are on the device).
  // `check_gradients` false skips the check for NaN and infinity, for
  // callers whose gradients are finite by construction (the synthetic runner
  // feeds the same drawn values every step).
  using BufferFactory =
      std::function<absl::StatusOr<std::unique_ptr<FusionBuffers>>(const std::vector<int64_t>& group_sizes)>;
  static absl::StatusOr<std::unique_ptr<StepPipeline>> Create(std::vector<int64_t> layer_sizes,
                                                              std::vector<GroupLayout> groups,
                                                              AggregationScheme* scheme,
                                                              const BufferFactory& make_buffers = nullptr,
                                                              bool check_gradients = true);
  ~StepPipeline();  // stops the communication thread after the exchanges in flight

  void BeginStep(uint64_t step);

  // Copies layer `layer`'s gradient of this step (host memory, or device
  // memory for device buffers). INVALID_ARGUMENT for a layer out of range, a
  // size that is not the layer's, or a layer given twice in a step;
  // FAILED_PRECONDITION for a placement the buffers cannot read. The step is
  // then failed (FinishStep reports it).
  absl::Status AddLayerGradient(int layer, GradientView grad);

  // Copies layer `layer`'s parameter values for this step, for schemes that
  // need them (AggregationScheme::needs_parameters); call it before the
  // layer's gradient. INVALID_ARGUMENT like AddLayerGradient.
  absl::Status AddLayerParameters(int layer, absl::Span<const float> params);
  bool needs_parameters() const { return scheme_->needs_parameters(); }

  // Records the end of the backward pass (for the timeline). A layer that
  // has not delivered its gradient by then fails the step.
  void MarkBackwardEnd();

  // Waits for every group's update. The error of the first failed group (or
  // of a missing layer) if any. Updates are indexed by group.
  absl::StatusOr<std::vector<Update>> FinishStep(absl::Duration timeout = absl::Minutes(5));

  // Waits up to `timeout` until FinishStep would return without waiting
  // (every group's exchange is over, or the step failed, or the pipeline
  // was aborted); false if it is still going.
  bool WaitUntilFinished(absl::Duration timeout) const;

  // Tells the scheme the step's updates were applied (OnApplied, group by
  // group); then, for a `residual_rescale` other than 1, has it multiply its
  // residuals by that factor before the next step encodes
  // (AggregationScheme::ScaleResiduals; the factor of a run that keeps them in
  // units of the learning rate is ResidualRescaleAfter, in
  // worker/training/learning_rate.h). INVALID_ARGUMENT for updates that are
  // not one per group, or a factor that is not finite and > 0 (nothing
  // settled then).
  absl::Status Applied(const std::vector<Update>& updates, float residual_rescale = 1.0f);

  // Stops the pipeline for good with `why` (not OK), for a worker that stops
  // because its job stopped (a divergence, here or on another worker): no
  // further group is handed to the scheme, FinishStep returns `why` at once
  // without waiting for exchanges in flight (their results are dropped; they
  // may be waiting on a worker that left), and so does every later step;
  // AddLayerGradient refuses gradients. The first reason is kept. The
  // destructor still waits for exchanges in flight, so a process that must
  // stop at once exits without destroying the pipeline.
  void Abort(const absl::Status& why);
  // OK, or the reason the pipeline was aborted.
  absl::Status aborted() const;

  // This step's events, in order, traffic and timeline.
  std::vector<PipelineEvent> events() const;
  StepTraffic traffic() const;
  StepTimeline timeline() const;

  int num_groups() const { return layout_.num_groups(); }
  int64_t group_size(int group) const { return layout_.group_size(group); }
  // Where each layer lies in the fusion buffers, and the inverse (a layer's
  // values within its group's update).
  const FusionLayout& layout() const { return layout_; }

 private:
  StepPipeline(FusionLayout layout, AggregationScheme* scheme, std::unique_ptr<FusionBuffers> buffers,
               bool check_gradients);
  void RecordLocked(PipelineEvent::Kind kind, int group);
  void AbortLocked(const absl::Status& why);
  bool HasGroupToExchangeLocked() const;
  bool FinishedLocked() const;
  void CommunicationLoop();

  const FusionLayout layout_;
  AggregationScheme* const scheme_;
  const bool check_gradients_;
  std::unique_ptr<FusionBuffers> buffers_;  // one per group
  std::vector<std::vector<float>> parameter_buffers_;  // one per group, when the scheme needs them

  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  uint64_t step_ = 0;
  absl::Time step_begin_;
  std::vector<bool> layer_seen_;
  std::vector<int> layers_missing_;  // per group
  std::vector<bool> ready_;          // per group: all its layers are in
  int next_to_exchange_ = 0;         // groups below were handed to the scheme
  std::vector<std::optional<absl::StatusOr<ExchangeResult>>> results_;
  absl::Status step_error_;
  absl::Status aborted_;  // sticky, see Abort
  int exchanges_in_flight_ = 0;
  std::vector<PipelineEvent> events_;
  int64_t next_seq_ = 0;
  bool stop_ = false;
  std::thread communication_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_PIPELINE_STEP_PIPELINE_H_
