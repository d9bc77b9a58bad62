#include "worker/pipeline/step_stats.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "worker/pipeline/trace_writer.h"

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
  window_received_ += traffic.bytes_received;
  window_dense_ += traffic.dense_bytes;
  ++window_steps_;
  total_seconds_ += seconds;
  total_bytes_ += traffic.bytes_sent;
  total_received_ += traffic.bytes_received;
  total_dense_ += traffic.dense_bytes;
  ++measured_steps_;
  const bool collective = traffic.collective_groups > 0;
  if (collective) ++collective_steps_;
  return StepReport{step, seconds, loss, traffic.bytes_sent, traffic.bytes_received, traffic.dense_bytes, collective,
                    phases};
}

Progress StepStats::TakeWindow(int64_t step, int epoch, double residual_norm) {
  Progress p;
  p.epoch = epoch;
  p.step = step + 1;
  p.train_loss = window_steps_ > 0 ? window_loss_ / window_steps_ : 0;
  p.step_seconds = window_steps_ > 0 ? window_seconds_ / window_steps_ : 0;
  p.bytes_sent_per_step = window_steps_ > 0 ? static_cast<double>(window_bytes_) / window_steps_ : 0;
  p.bytes_received_per_step = window_steps_ > 0 ? static_cast<double>(window_received_) / window_steps_ : 0;
  p.compression_ratio = window_bytes_ > 0 ? static_cast<double>(window_dense_) / window_bytes_ : 0;
  p.elapsed_seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  p.residual_norm = residual_norm;
  window_loss_ = window_seconds_ = 0;
  window_bytes_ = window_received_ = window_dense_ = 0;
  window_steps_ = 0;
  return p;
}

void StepStats::Summarize(int64_t steps, TrainingSummary* summary) const {
  summary->steps = steps;
  summary->wall_seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  summary->mean_step_seconds = measured_steps_ > 0 ? total_seconds_ / measured_steps_ : 0;
  summary->bytes_sent_per_step = measured_steps_ > 0 ? static_cast<double>(total_bytes_) / measured_steps_ : 0;
  summary->bytes_received_per_step =
      measured_steps_ > 0 ? static_cast<double>(total_received_) / measured_steps_ : 0;
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

double StepStats::ElapsedSeconds() const { return absl::ToDoubleSeconds(absl::Now() - start_); }

double ResidualNormOf(const std::vector<GroupState>& state) {
  double sum = 0;
  for (const GroupState& group : state) {
    for (float x : group.residual) sum += static_cast<double>(x) * x;
  }
  return std::sqrt(sum);
}

namespace {

std::string DivergenceJson(const std::optional<Divergence>& d) {
  if (!d.has_value()) return "null";
  return absl::StrCat("{\"step\": ", d->step, ", \"group\": ", d->group >= 0 ? absl::StrCat(d->group) : "null",
                      ", \"worker\": ", JsonString(d->worker), ", \"what\": ", JsonString(d->what),
                      ", \"index\": ", d->index >= 0 ? absl::StrCat(d->index) : "null",
                      ", \"value\": ", JsonString(absl::StrCat(d->value)), ", \"message\": ",
                      JsonString(d->Describe()), "}");
}

}  // namespace

std::string PeelRecoveryWarning(double share) {
  if (share < 0 || share >= kPeelRecoveryWarning) return "";
  return absl::StrFormat(
      "the peel decodes gave back %.1f%% of the energy this worker inserted into its sketches (under %.0f%%): the "
      "table is too small for the workers' selections; the rest waited in the residual. Leave count_sketch's "
      "width, cols and workers unset to size it for the job",
      100 * share, 100 * kPeelRecoveryWarning);
}

std::string ChanceAccuracyWarning(double accuracy, int64_t classes) {
  if (classes <= 0 || !(accuracy >= 0)) return "";
  const double bound = kChanceAccuracyFactor / static_cast<double>(classes);
  if (accuracy > bound) return "";
  return absl::StrFormat(
      "the final test accuracy is %.2f%%, at most %.2f%% (%.1f times chance over %d classes): the run did not "
      "learn, though its loss never passed the divergence bound. Lower the learning rate or the compression",
      100 * accuracy, 100 * bound, kChanceAccuracyFactor, classes);
}

void AddEndOfRunWarnings(int64_t classes, TrainingSummary* summary) {
  for (std::string w : {PeelRecoveryWarning(summary->peel_recovered_share),
                        ChanceAccuracyWarning(summary->final_test_accuracy, classes)}) {
    if (!w.empty()) summary->warnings.push_back(std::move(w));
  }
}

std::string SummaryJson(const SummaryHeader& h, const TrainingSummary& summary) {
  std::string epochs;
  for (const Progress& p : summary.epochs) {
    absl::StrAppend(&epochs, epochs.empty() ? "" : ", ", "{\"epoch\": ", p.epoch, ", \"step\": ", p.step,
                    ", \"train_loss\": ", JsonNumber(p.train_loss, 6), ", \"test_loss\": ", JsonNumber(p.test_loss, 6),
                    ", \"test_accuracy\": ", JsonNumber(p.test_accuracy, 6),
                    ", \"elapsed_s\": ", JsonNumber(p.elapsed_seconds, 3), "}");
  }
  std::string curve;
  for (const CurvePoint& c : summary.curve) {
    absl::StrAppend(&curve, curve.empty() ? "" : ", ", "{\"step\": ", c.step,
                    ", \"elapsed_s\": ", JsonNumber(c.elapsed_seconds, 3),
                    ", \"test_accuracy\": ", JsonNumber(c.test_accuracy, 6),
                    ", \"test_loss\": ", JsonNumber(c.test_loss, 6), ", \"bytes_sent\": ", c.bytes_sent, "}");
  }
  std::string warnings;
  for (const std::string& w : summary.warnings) absl::StrAppend(&warnings, warnings.empty() ? "" : ", ", JsonString(w));
  const StepPhases& phases = summary.mean_phases;
  return absl::StrCat(
      "{\"worker\": ", JsonString(h.worker), ", \"rank\": ", h.rank, ", \"workload\": ", JsonString(h.workload),
      ", \"scheme\": ", JsonString(h.scheme), ", \"compressor\": ", JsonString(h.compressor),
      ", \"fusion\": ", JsonString(h.fusion), ", \"run\": ", JsonString(h.run), ", \"steps\": ", summary.steps,
      ", \"resumed_from_step\": ", summary.resumed_from_step,
      ", \"optimizer\": ", JsonString(h.optimizer.empty() ? "sgd" : h.optimizer),
      ", \"quality_metric\": ", JsonString(summary.judged_by_loss ? "test_loss" : "test_accuracy"),
      ", \"final_test_accuracy\": ", JsonNumber(summary.final_test_accuracy, 6),
      ", \"final_test_loss\": ", JsonNumber(summary.final_test_loss, 6),
      ", \"diverged\": ", DivergenceJson(summary.diverged), ", \"wall_s\": ", JsonNumber(summary.wall_seconds, 3),
      ", \"eval_s\": ", JsonNumber(summary.eval_seconds, 3),
      ", \"mean_step_s\": ", JsonNumber(summary.mean_step_seconds, 6),
      ", \"bytes_sent_per_step\": ", JsonNumber(summary.bytes_sent_per_step, 1),
      ", \"bytes_received_per_step\": ", JsonNumber(summary.bytes_received_per_step, 1),
      ", \"compression_ratio\": ", JsonNumber(summary.compression_ratio, 3),
      ", \"collective_steps\": ", summary.collective_steps, ", \"steady_steps\": ", summary.steady_steps,
      ", \"median_step_s\": ", JsonNumber(summary.median_step_seconds, 6),
      ", \"phases_s\": {\"backward\": ", JsonNumber(phases.backward, 6),
      ", \"compress\": ", JsonNumber(phases.compress, 6), ", \"communicate\": ", JsonNumber(phases.communicate, 6),
      ", \"decode\": ", JsonNumber(phases.decode, 6), "}",
      ", \"peel_recovered_share\": ",
      summary.peel_recovered_share >= 0 ? JsonNumber(summary.peel_recovered_share, 6) : std::string("null"),
      ", \"warnings\": [", warnings, "], \"epochs\": [", epochs, "], \"curve\": [", curve, "]}");
}

}  // namespace sketchfuse
