#include "worker/pipeline/step_pipeline.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "worker/core/divergence.h"
#include "worker/pipeline/step_apply.h"

namespace sketchfuse {

const char* PipelineEventName(PipelineEvent::Kind kind) {
  switch (kind) {
    case PipelineEvent::Kind::kGroupReady: return "group_ready";
    case PipelineEvent::Kind::kExchangeStart: return "exchange_start";
    case PipelineEvent::Kind::kExchangeSent: return "exchange_sent";
    case PipelineEvent::Kind::kUpdateReceived: return "update_received";
    case PipelineEvent::Kind::kBackwardEnd: return "backward_end";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<StepPipeline>> StepPipeline::Create(std::vector<int64_t> layer_sizes,
                                                                   std::vector<GroupLayout> groups,
                                                                   AggregationScheme* scheme,
                                                                   const BufferFactory& make_buffers,
                                                                   bool check_gradients) {
  if (scheme == nullptr) return absl::InvalidArgumentError("no aggregation scheme");
  absl::StatusOr<FusionLayout> layout = FusionLayout::Create(std::move(layer_sizes), std::move(groups));
  if (!layout.ok()) return layout.status();
  const std::vector<int64_t>& group_sizes = layout->group_sizes();
  std::unique_ptr<FusionBuffers> buffers;
  if (make_buffers) {
    absl::StatusOr<std::unique_ptr<FusionBuffers>> made = make_buffers(group_sizes);
    if (!made.ok()) return made.status();
    buffers = *std::move(made);
  } else {
    buffers = MakeHostFusionBuffers(group_sizes);
  }
  return std::unique_ptr<StepPipeline>(
      new StepPipeline(*std::move(layout), scheme, std::move(buffers), check_gradients));
}

StepPipeline::StepPipeline(FusionLayout layout, AggregationScheme* scheme, std::unique_ptr<FusionBuffers> buffers,
                           bool check_gradients)
    : layout_(std::move(layout)), scheme_(scheme), check_gradients_(check_gradients), buffers_(std::move(buffers)) {
  for (int g = 0; g < layout_.num_groups(); ++g) {
    parameter_buffers_.emplace_back(scheme_->needs_parameters() ? layout_.group_size(g) : 0);
  }
  layer_seen_.assign(layout_.num_layers(), true);  // no step begun
  layers_missing_.assign(layout_.num_groups(), 0);
  ready_.assign(layout_.num_groups(), false);
  next_to_exchange_ = layout_.num_groups();  // no step begun
  results_.resize(layout_.num_groups());
  communication_ = std::thread([this] { CommunicationLoop(); });
}

StepPipeline::~StepPipeline() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [this] { return exchanges_in_flight_ == 0 && !HasGroupToExchangeLocked(); });
    stop_ = true;
  }
  changed_.notify_all();
  communication_.join();
}

void StepPipeline::RecordLocked(PipelineEvent::Kind kind, int group) {
  events_.push_back({kind, group, next_seq_++, absl::Now()});
}

void StepPipeline::BeginStep(uint64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  step_ = step;
  step_begin_ = absl::Now();
  layer_seen_.assign(layout_.num_layers(), false);
  for (int g = 0; g < layout_.num_groups(); ++g) {
    layers_missing_[g] = layout_.layers_in_group(g);
    ready_[g] = false;
    results_[g].reset();
  }
  next_to_exchange_ = 0;
  step_error_ = absl::OkStatus();
  events_.clear();
}

absl::Status StepPipeline::AddLayerParameters(int layer, absl::Span<const float> params) {
  if (!scheme_->needs_parameters()) return absl::OkStatus();
  if (layer < 0 || layer >= layout_.num_layers()) {
    return absl::InvalidArgumentError(absl::StrCat("layer ", layer, " is out of range [0, ", layout_.num_layers(), ")"));
  }
  if (static_cast<int64_t>(params.size()) != layout_.layer_size(layer)) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", layer, " has ", layout_.layer_size(layer), " elements; got ", params.size(), " parameters"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const LayerPiece& piece : layout_.pieces(layer)) {
    std::memcpy(parameter_buffers_[piece.group].data() + piece.group_offset, params.data() + piece.layer_offset,
                static_cast<size_t>(piece.size) * sizeof(float));
  }
  return absl::OkStatus();
}

absl::Status StepPipeline::AddLayerGradient(int layer, GradientView grad) {
  absl::Status error;
  if (layer < 0 || layer >= layout_.num_layers()) {
    error = absl::InvalidArgumentError(absl::StrCat("layer ", layer, " is out of range [0, ", layout_.num_layers(), ")"));
  } else if (static_cast<int64_t>(grad.size()) != layout_.layer_size(layer)) {
    error = absl::InvalidArgumentError(
        absl::StrCat("layer ", layer, " has ", layout_.layer_size(layer), " elements; got a gradient of ", grad.size()));
  }
  std::lock_guard<std::mutex> lock(mu_);
  // An in-flight exchange of an aborted step may still read the buffers.
  if (!aborted_.ok()) return aborted_;
  if (error.ok() && layer_seen_[layer]) {
    error = absl::InvalidArgumentError(absl::StrCat("layer ", layer, "'s gradient was given twice in step ", step_));
  }
  if (!error.ok()) {
    if (step_error_.ok()) step_error_ = error;
    changed_.notify_all();
    return error;
  }
  // Different layers write disjoint ranges; a group is not handed over
  // before its last layer is in, so the copies may run under the lock cheaply.
  for (const LayerPiece& piece : layout_.pieces(layer)) {
    const GradientView values = grad.Sub(static_cast<size_t>(piece.layer_offset), static_cast<size_t>(piece.size));
    if (absl::Status written = buffers_->Write(piece.group, piece.group_offset, values); !written.ok()) {
      error = absl::Status(written.code(), absl::StrCat("layer ", layer, ": ", written.message()));
      if (step_error_.ok()) step_error_ = error;
      changed_.notify_all();
      return error;
    }
  }
  layer_seen_[layer] = true;
  for (const LayerPiece& piece : layout_.pieces(layer)) {
    const int g = piece.group;
    if (layers_missing_[g] == 1) {
      if (absl::Status sealed = buffers_->Seal(g); !sealed.ok()) {
        if (step_error_.ok()) step_error_ = sealed;
        changed_.notify_all();
        return sealed;
      }
    }
    if (--layers_missing_[g] == 0) {
      RecordLocked(PipelineEvent::Kind::kGroupReady, g);
      ready_[g] = true;
      changed_.notify_all();
    }
  }
  return absl::OkStatus();
}

void StepPipeline::MarkBackwardEnd() {
  std::lock_guard<std::mutex> lock(mu_);
  RecordLocked(PipelineEvent::Kind::kBackwardEnd, -1);
  for (size_t l = 0; l < layer_seen_.size(); ++l) {
    if (!layer_seen_[l] && step_error_.ok()) {
      step_error_ = absl::FailedPreconditionError(absl::StrCat(
          "layer ", l, " produced no gradient in step ", step_, " (a parameter the loss does not use?)"));
    }
  }
  changed_.notify_all();
}

bool StepPipeline::HasGroupToExchangeLocked() const {
  return aborted_.ok() && next_to_exchange_ < layout_.num_groups() && ready_[next_to_exchange_];
}

void StepPipeline::AbortLocked(const absl::Status& why) {
  if (!aborted_.ok()) return;
  aborted_ = why.ok() ? absl::AbortedError("the pipeline was aborted") : why;
  changed_.notify_all();
}

void StepPipeline::Abort(const absl::Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  AbortLocked(why);
}

absl::Status StepPipeline::aborted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return aborted_;
}

void StepPipeline::CommunicationLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    changed_.wait(lock, [this] { return stop_ || HasGroupToExchangeLocked(); });
    if (stop_) return;
    const int g = next_to_exchange_++;
    ++exchanges_in_flight_;
    const uint64_t step = step_;
    lock.unlock();
    // The group is sealed: nothing writes its buffer until the next step.
    const GradientView grad = buffers_->Get(g);
    const absl::Status finite = !check_gradients_ || grad.on_device()
                                    ? absl::OkStatus()
                                    : CheckFiniteValues("gradient", static_cast<int64_t>(step), g, grad.host());
    if (!finite.ok()) {
      // Never exchanged: the peers learn of it through the job (a notice, or
      // this worker leaving), not through a poisoned sum.
      lock.lock();
      results_[g] = finite;
      if (step_error_.ok()) step_error_ = finite;
      --exchanges_in_flight_;
      AbortLocked(finite);
      continue;
    }
    lock.lock();
    RecordLocked(PipelineEvent::Kind::kExchangeStart, g);
    lock.unlock();
    scheme_->Exchange(step, g, grad, parameter_buffers_[g], [this, g](absl::StatusOr<ExchangeResult> result) {
      std::lock_guard<std::mutex> done_lock(mu_);
      RecordLocked(PipelineEvent::Kind::kUpdateReceived, g);
      results_[g] = std::move(result);
      --exchanges_in_flight_;
      changed_.notify_all();
    });
    lock.lock();
    RecordLocked(PipelineEvent::Kind::kExchangeSent, g);
  }
}

bool StepPipeline::FinishedLocked() const {
  if (!aborted_.ok()) return true;
  if (!step_error_.ok()) return exchanges_in_flight_ == 0 && !HasGroupToExchangeLocked();
  for (const auto& result : results_) {
    if (!result.has_value()) return false;
  }
  return true;
}

bool StepPipeline::WaitUntilFinished(absl::Duration timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return changed_.wait_for(lock, absl::ToChronoMilliseconds(timeout), [this] { return FinishedLocked(); });
}

absl::StatusOr<std::vector<Update>> StepPipeline::FinishStep(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!changed_.wait_for(lock, absl::ToChronoMilliseconds(timeout), [this] { return FinishedLocked(); })) {
    std::vector<std::string> missing;
    for (size_t g = 0; g < results_.size(); ++g) {
      if (!results_[g].has_value()) {
        missing.push_back(absl::StrCat(g, layers_missing_[g] > 0 ? " (layers missing)" : " (no update)"));
      }
    }
    return absl::DeadlineExceededError(
        absl::StrCat("step ", step_, " did not finish in ", absl::FormatDuration(timeout), "; groups: ",
                     absl::StrJoin(missing, ", ")));
  }
  if (!aborted_.ok()) return aborted_;
  if (!step_error_.ok()) return step_error_;
  // Every group is in: the scheme may repair failed groups (the hybrid redoes
  // them on the other route). The communication thread is idle meanwhile.
  std::vector<absl::StatusOr<ExchangeResult>> results;
  results.reserve(results_.size());
  for (auto& result : results_) results.push_back(std::move(*result));
  const uint64_t step = step_;
  lock.unlock();
  absl::StatusOr<std::vector<Update>> updates = ReconcileStep(*scheme_, step, results);
  lock.lock();
  // The results stay for the step's timeline and traffic.
  for (size_t g = 0; g < results.size(); ++g) results_[g] = std::move(results[g]);
  return updates;
}

absl::Status StepPipeline::Applied(const std::vector<Update>& updates, float residual_rescale) {
  if (updates.size() != static_cast<size_t>(layout_.num_groups())) {
    return absl::InvalidArgumentError(absl::StrCat(updates.size(), " updates for ", layout_.num_groups(), " groups"));
  }
  if (absl::Status valid = ValidateResidualRescale(residual_rescale); !valid.ok()) return valid;
  if (absl::Status settled = SettleStep(*scheme_, updates); !settled.ok()) return settled;
  return residual_rescale == 1.0f ? absl::OkStatus() : scheme_->ScaleResiduals(residual_rescale);
}

std::vector<PipelineEvent> StepPipeline::events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

StepTimeline StepPipeline::timeline() const {
  std::lock_guard<std::mutex> lock(mu_);
  StepTimeline timeline;
  timeline.begin = step_begin_;
  timeline.backward_end = step_begin_;
  for (const PipelineEvent& e : events_) {
    if (e.kind == PipelineEvent::Kind::kBackwardEnd) timeline.backward_end = e.time;
  }
  for (const auto& result : results_) {
    const bool ok = result.has_value() && result->ok();
    timeline.groups.push_back(ok ? (*result)->spans : std::vector<TraceSpan>());
    timeline.routes.push_back(ok ? RouteName((*result)->route) : "");
  }
  return timeline;
}

StepTraffic StepPipeline::traffic() const {
  std::lock_guard<std::mutex> lock(mu_);
  StepTraffic traffic;
  for (const auto& result : results_) {
    if (result.has_value() && result->ok()) {
      traffic.bytes_sent += (*result)->bytes_sent;
      traffic.bytes_received += (*result)->bytes_received;
      traffic.dense_bytes += (*result)->dense_bytes;
      if ((*result)->route == Route::kDecentralized) ++traffic.collective_groups;
    }
  }
  return traffic;
}

}  // namespace sketchfuse
