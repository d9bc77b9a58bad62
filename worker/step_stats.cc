#include "worker/step_stats.h"

#include <algorithm>
#include <cmath>

#include "absl/time/clock.h"

namespace sketchfuse {

StepPhases PhasesOf(const StepTimeline& timeline) {
  StepPhases phases;
  phases.backward = std::max(0.0, absl::ToDoubleSeconds(timeline.backward_end - timeline.begin));
  for (const std::vector<TraceSpan>& spans : timeline.groups) {
    for (const TraceSpan& span : spans) {
      const double seconds = std::max(0.0, absl::ToDoubleSeconds(span.end - span.begin));
      if (span.name == "compress") {
        phases.compress += seconds;
      } else if (span.name == "decode") {
        phases.decode += seconds;
      } else {
        phases.communicate += seconds;
      }
    }
  }
  return phases;
}

StepReport StepStats::Add(int64_t step, double seconds, double loss, const StepTraffic& traffic,
                          const StepPhases& phases) {
  step_seconds_.push_back(seconds);
  step_phases_.push_back(phases);
  window_loss_ += loss;
  window_seconds_ += seconds;
  window_bytes_ += traffic.bytes_sent;
  window_dense_ += traffic.dense_bytes;
  ++window_steps_;
  total_seconds_ += seconds;
  total_bytes_ += traffic.bytes_sent;
  total_dense_ += traffic.dense_bytes;
  ++measured_steps_;
  const bool collective = traffic.collective_groups > 0;
  if (collective) ++collective_steps_;
  return StepReport{step, seconds, loss, traffic.bytes_sent, traffic.dense_bytes, collective, phases};
}

Progress StepStats::TakeWindow(int64_t step, int epoch, double residual_norm) {
  Progress p;
  p.epoch = epoch;
  p.step = step + 1;
  p.train_loss = window_steps_ > 0 ? window_loss_ / window_steps_ : 0;
  p.step_seconds = window_steps_ > 0 ? window_seconds_ / window_steps_ : 0;
  p.bytes_sent_per_step = window_steps_ > 0 ? static_cast<double>(window_bytes_) / window_steps_ : 0;
  p.compression_ratio = window_bytes_ > 0 ? static_cast<double>(window_dense_) / window_bytes_ : 0;
  p.elapsed_seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  p.residual_norm = residual_norm;
  window_loss_ = window_seconds_ = 0;
  window_bytes_ = window_dense_ = 0;
  window_steps_ = 0;
  return p;
}

void StepStats::Summarize(int64_t steps, TrainingSummary* summary) const {
  summary->steps = steps;
  summary->wall_seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  summary->mean_step_seconds = measured_steps_ > 0 ? total_seconds_ / measured_steps_ : 0;
  summary->bytes_sent_per_step = measured_steps_ > 0 ? static_cast<double>(total_bytes_) / measured_steps_ : 0;
  summary->compression_ratio = total_bytes_ > 0 ? static_cast<double>(total_dense_) / total_bytes_ : 0;
  summary->collective_steps = collective_steps_;
  const size_t first = step_seconds_.size() > 1 ? 1 : 0;
  std::vector<double> steady(step_seconds_.begin() + first, step_seconds_.end());
  summary->steady_steps = static_cast<int64_t>(steady.size());
  summary->median_step_seconds = 0;
  summary->mean_phases = StepPhases();
  if (steady.empty()) return;
  std::sort(steady.begin(), steady.end());
  const size_t n = steady.size();
  summary->median_step_seconds = n % 2 == 1 ? steady[n / 2] : 0.5 * (steady[n / 2 - 1] + steady[n / 2]);
  for (size_t i = first; i < step_phases_.size(); ++i) {
    summary->mean_phases.backward += step_phases_[i].backward / n;
    summary->mean_phases.compress += step_phases_[i].compress / n;
    summary->mean_phases.communicate += step_phases_[i].communicate / n;
    summary->mean_phases.decode += step_phases_[i].decode / n;
  }
}

double ResidualNormOf(const std::vector<std::vector<float>>& state) {
  double sum = 0;
  for (size_t i = 0; i < state.size(); i += 2) {
    for (float x : state[i]) sum += static_cast<double>(x) * x;
  }
  return std::sqrt(sum);
}

}  // namespace sketchfuse
