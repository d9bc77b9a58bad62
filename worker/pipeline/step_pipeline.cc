#include "worker/pipeline/step_pipeline.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "worker/core/divergence.h"

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
  int next = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].first_layer != next || groups[g].num_layers < 1) {
      return absl::InvalidArgumentError(absl::StrCat("group ", g, " starts at layer ", groups[g].first_layer,
                                                     " with ", groups[g].num_layers,
                                                     " layers; expected a non-empty range from layer ", next));
    }
    next += groups[g].num_layers;
  }
  if (next != static_cast<int>(layer_sizes.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("the groups cover ", next, " layers; the model has ", layer_sizes.size()));
  }
  std::vector<int64_t> group_sizes;
  for (const GroupLayout& group : groups) {
    int64_t size = 0;
    for (int l = group.first_layer; l < group.first_layer + group.num_layers; ++l) {
      if (layer_sizes[l] <= 0) return absl::InvalidArgumentError(absl::StrCat("layer ", l, " is empty"));
      size += layer_sizes[l];
    }
    group_sizes.push_back(size);
  }
  std::unique_ptr<FusionBuffers> buffers;
  if (make_buffers) {
    absl::StatusOr<std::unique_ptr<FusionBuffers>> made = make_buffers(group_sizes);
    if (!made.ok()) return made.status();
    buffers = *std::move(made);
  } else {
    buffers = MakeHostFusionBuffers(group_sizes);
  }
  return std::unique_ptr<StepPipeline>(new StepPipeline(std::move(layer_sizes), std::move(groups), scheme,
                                                        std::move(group_sizes), std::move(buffers),
                                                        check_gradients));
}

StepPipeline::StepPipeline(std::vector<int64_t> layer_sizes, std::vector<GroupLayout> groups,
                           AggregationScheme* scheme, std::vector<int64_t> group_sizes,
                           std::unique_ptr<FusionBuffers> buffers, bool check_gradients)
    : layer_sizes_(std::move(layer_sizes)),
      groups_(std::move(groups)),
      scheme_(scheme),
      check_gradients_(check_gradients),
      group_sizes_(std::move(group_sizes)),
      buffers_(std::move(buffers)) {
  layer_offsets_.resize(layer_sizes_.size());
  group_of_layer_.resize(layer_sizes_.size());
  for (size_t g = 0; g < groups_.size(); ++g) {
    int64_t offset = 0;
    for (int l = groups_[g].first_layer; l < groups_[g].first_layer + groups_[g].num_layers; ++l) {
      layer_offsets_[l] = offset;
      group_of_layer_[l] = static_cast<int>(g);
      offset += layer_sizes_[l];
    }
    parameter_buffers_.emplace_back(scheme_->needs_parameters() ? group_sizes_[g] : 0);
  }
  layer_seen_.assign(layer_sizes_.size(), true);  // no step begun
  layers_missing_.assign(groups_.size(), 0);
  ready_.assign(groups_.size(), false);
  next_to_exchange_ = static_cast<int>(groups_.size());  // no step begun
  results_.resize(groups_.size());
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
  layer_seen_.assign(layer_sizes_.size(), false);
  for (size_t g = 0; g < groups_.size(); ++g) {
    layers_missing_[g] = groups_[g].num_layers;
    ready_[g] = false;
    results_[g].reset();
  }
  next_to_exchange_ = 0;
  step_error_ = absl::OkStatus();
  events_.clear();
}

absl::Status StepPipeline::AddLayerParameters(int layer, absl::Span<const float> params) {
  if (!scheme_->needs_parameters()) return absl::OkStatus();
  if (layer < 0 || layer >= static_cast<int>(layer_sizes_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("layer ", layer, " is out of range [0, ", layer_sizes_.size(), ")"));
  }
  if (static_cast<int64_t>(params.size()) != layer_sizes_[layer]) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", layer, " has ", layer_sizes_[layer], " elements; got ", params.size(), " parameters"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  const int g = group_of_layer_[layer];
  std::memcpy(parameter_buffers_[g].data() + layer_offsets_[layer], params.data(), params.size() * sizeof(float));
  return absl::OkStatus();
}

absl::Status StepPipeline::AddLayerGradient(int layer, GradientView grad) {
  absl::Status error;
  if (layer < 0 || layer >= static_cast<int>(layer_sizes_.size())) {
    error = absl::InvalidArgumentError(absl::StrCat("layer ", layer, " is out of range [0, ", layer_sizes_.size(), ")"));
  } else if (static_cast<int64_t>(grad.size()) != layer_sizes_[layer]) {
    error = absl::InvalidArgumentError(
        absl::StrCat("layer ", layer, " has ", layer_sizes_[layer], " elements; got a gradient of ", grad.size()));
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
  const int g = group_of_layer_[layer];
  // Different layers write disjoint ranges; the group is not handed over
  // before its last layer is in, so the copy may run under the lock cheaply.
  if (absl::Status written = buffers_->Write(g, layer_offsets_[layer], grad); !written.ok()) {
    error = absl::Status(written.code(), absl::StrCat("layer ", layer, ": ", written.message()));
    if (step_error_.ok()) step_error_ = error;
    changed_.notify_all();
    return error;
  }
  layer_seen_[layer] = true;
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
  return aborted_.ok() && next_to_exchange_ < static_cast<int>(groups_.size()) && ready_[next_to_exchange_];
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

absl::StatusOr<std::vector<Update>> StepPipeline::FinishStep(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  auto all_done = [this] {
    if (!aborted_.ok()) return true;
    if (!step_error_.ok()) return exchanges_in_flight_ == 0 && !HasGroupToExchangeLocked();
    for (const auto& result : results_) {
      if (!result.has_value()) return false;
    }
    return true;
  };
  if (!changed_.wait_for(lock, absl::ToChronoMilliseconds(timeout), all_done)) {
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
  absl::Status reconciled = scheme_->Reconcile(step, results);
  lock.lock();
  for (size_t g = 0; g < results.size(); ++g) results_[g] = std::move(results[g]);
  if (!reconciled.ok()) return reconciled;
  for (size_t g = 0; g < results_.size(); ++g) {
    if (!results_[g]->ok()) return results_[g]->status();
  }
  std::vector<Update> updates;
  updates.reserve(results_.size());
  for (auto& result : results_) updates.push_back(std::move((*result)->update));
  return updates;
}

absl::Status StepPipeline::Applied(const std::vector<Update>& updates) {
  if (updates.size() != groups_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(updates.size(), " updates for ", groups_.size(), " groups"));
  }
  for (size_t g = 0; g < updates.size(); ++g) {
    if (absl::Status s = scheme_->OnApplied(static_cast<int>(g), updates[g]); !s.ok()) return s;
  }
  return absl::OkStatus();
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
      traffic.dense_bytes += (*result)->dense_bytes;
      if ((*result)->route == Route::kDecentralized) ++traffic.collective_groups;
    }
  }
  return traffic;
}

}  // namespace sketchfuse
