#include "worker/training/step_loop.h"

#include <condition_variable>
#include <cstring>
#include <limits>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "c10/util/Exception.h"
#include "worker/training/epoch_order.h"
#include "worker/training/learning_rate.h"

namespace sketchfuse {
namespace {

// How often the wait for several participants' steps looks for one that
// failed (a participant whose gradient diverged never reaches the others'
// exchanges).
constexpr absl::Duration kFailurePoll = absl::Milliseconds(100);

bool SameUpdate(const Update& a, const Update& b) {
  return a.dense == b.dense && a.indices == b.indices && a.values.size() == b.values.size() &&
         std::memcmp(a.values.data(), b.values.data(), a.values.size() * sizeof(float)) == 0;
}

// The loop's state across steps.
class Loop {
 public:
  Loop(Workload& workload, const Participants& participants, const StepLoopConfig& config)
      : workload_(workload), parts_(participants), config_(config), orders_(participants.pipelines.size()) {}

  absl::StatusOr<TrainingSummary> Run(const std::function<void(const Progress&)>& progress);

 private:
  uint32_t count() const { return static_cast<uint32_t>(parts_.pipelines.size()); }
  absl::Status Fail(uint32_t p, const absl::Status& why) const {
    return config_.on_failure ? config_.on_failure(p, why) : why;
  }
  // One step of every participant; the mean of their losses in *loss.
  absl::Status Step(int64_t step, double* loss);
  // Every participant's updates of the step, or the first failure.
  absl::StatusOr<std::vector<std::vector<Update>>> FinishAll();
  StepTraffic MeanTraffic() const;
  double PeelShare() const;
  std::optional<Evaluation> TimedEvaluate(bool whole_test_set);

  Workload& workload_;
  const Participants& parts_;
  const StepLoopConfig& config_;
  std::vector<std::vector<int64_t>> orders_;  // each participant's order of its current epoch
  absl::Time apply_begin_, apply_end_;
  double eval_seconds_ = 0;
};

absl::Status Loop::Step(int64_t step, double* loss_out) {
  const v1::RunConfig& run = config_.run;
  const int64_t steps_per_epoch = run.steps_per_epoch();
  const int64_t batch = run.batch_size();
  const int64_t epoch = step / steps_per_epoch, in_epoch = step % steps_per_epoch;
  double loss_sum = 0;
  for (uint32_t p = 0; p < count(); ++p) {
    absl::Span<const int64_t> examples;
    if (workload_.examples(p) > 0) {
      if (in_epoch == 0 || step == config_.first_step || orders_[p].empty()) {
        orders_[p] = EpochOrder(run.seed(), static_cast<int>(parts_.ranks[p]), epoch, workload_.examples(p));
      }
      examples = absl::MakeConstSpan(orders_[p].data() + in_epoch * batch, batch);
    }
    StepPipeline& pipeline = *parts_.pipelines[p];
    pipeline.BeginStep(static_cast<uint64_t>(step));
    absl::StatusOr<double> loss = workload_.Forward(p, step, examples);
    if (!loss.ok()) return Fail(p, loss.status());
    // Before any gradient of this step reaches the pipeline.
    if (workload_.loss_classes() > 0) {
      if (absl::Status sane = CheckLoss(step, *loss, workload_.loss_classes()); !sane.ok()) return Fail(p, sane);
    }
    loss_sum += *loss;
    if (absl::Status backward = workload_.Backward(p, step, pipeline); !backward.ok()) return Fail(p, backward);
    pipeline.MarkBackwardEnd();
  }
  *loss_out = loss_sum / count();

  absl::StatusOr<std::vector<std::vector<Update>>> updates = FinishAll();
  if (!updates.ok()) return updates.status();
  const std::vector<Update>& first = (*updates)[0];
  for (uint32_t p = 1; p < count(); ++p) {
    for (size_t g = 0; g < first.size(); ++g) {
      if (!SameUpdate((*updates)[p][g], first[g])) {
        return Fail(p, absl::InternalError(absl::StrCat(
                           "step ", step, ": participant ", p, "'s update of group ", g,
                           " differs from participant 0's (every worker of a route must get the same update)")));
      }
    }
  }
  // Every worker holds the same updates, so all of them stop at this step.
  for (size_t g = 0; g < first.size(); ++g) {
    if (absl::Status finite = CheckFiniteValues("update", step, static_cast<int>(g), first[g].values); !finite.ok()) {
      return Fail(0, finite);
    }
  }
  apply_begin_ = absl::Now();
  if (absl::Status applied = workload_.Apply(first, parts_.pipelines[0]->layout(), config_.world,
                                             LearningRateAt(run, config_.world, step));
      !applied.ok()) {
    return applied;
  }
  const float rescale = ResidualRescaleAfter(run, config_.world, step);
  for (uint32_t p = 0; p < count(); ++p) {
    if (absl::Status settled = parts_.pipelines[p]->Applied((*updates)[p], rescale); !settled.ok()) {
      return Fail(p, settled);
    }
  }
  apply_end_ = absl::Now();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<Update>>> Loop::FinishAll() {
  const uint32_t n = count();
  std::vector<std::vector<Update>> updates(n);
  if (n == 1) {
    absl::StatusOr<std::vector<Update>> got = parts_.pipelines[0]->FinishStep();
    if (!got.ok()) return Fail(0, got.status());
    updates[0] = *std::move(got);
    return updates;
  }
  // Each participant finishes its step on a thread of its own: a scheme's
  // Reconcile may meet the others (the hybrid agrees on failed groups in a
  // collective). One that fails by itself (its gradient, or an exchange)
  // stops the others at once.
  std::vector<absl::StatusOr<std::vector<Update>>> got(n, absl::UnknownError("not finished"));
  std::mutex mu;
  std::condition_variable changed;
  uint32_t finished = 0;  // guarded by mu
  int first_failed = -1;  // guarded by mu: the first participant whose step failed
  std::vector<std::thread> finishers;
  finishers.reserve(n);
  for (uint32_t p = 0; p < n; ++p) {
    finishers.emplace_back([&, p] {
      absl::StatusOr<std::vector<Update>> result = parts_.pipelines[p]->FinishStep(config_.collective_timeout);
      std::lock_guard<std::mutex> lock(mu);
      if (!result.ok() && first_failed < 0) first_failed = static_cast<int>(p);
      got[p] = std::move(result);
      ++finished;
      changed.notify_all();
    });
  }
  absl::Status failure;
  {
    std::unique_lock<std::mutex> lock(mu);
    while (finished < n && failure.ok()) {
      changed.wait_for(lock, absl::ToChronoMilliseconds(kFailurePoll),
                       [&] { return finished == n || first_failed >= 0; });
      if (finished == n) break;
      for (uint32_t p = 0; p < n && failure.ok(); ++p) {
        if (absl::Status aborted = parts_.pipelines[p]->aborted(); !aborted.ok()) failure = Fail(p, aborted);
      }
      if (failure.ok() && first_failed >= 0) failure = Fail(static_cast<uint32_t>(first_failed), got[first_failed].status());
    }
  }
  for (std::thread& finisher : finishers) finisher.join();
  if (!failure.ok()) return failure;
  for (uint32_t p = 0; p < n; ++p) {
    if (got[p].ok()) {
      updates[p] = *std::move(got[p]);
      continue;
    }
    // The first pipeline that stopped by itself is the one to blame.
    for (uint32_t other = 0; other < n; ++other) {
      if (absl::Status aborted = parts_.pipelines[other]->aborted(); !aborted.ok()) return Fail(other, aborted);
    }
    return Fail(p, got[p].status());
  }
  return updates;
}

StepTraffic Loop::MeanTraffic() const {
  if (count() == 1) return parts_.pipelines[0]->traffic();
  StepTraffic mean;
  for (const StepPipeline* pipeline : parts_.pipelines) {
    const StepTraffic t = pipeline->traffic();
    mean.bytes_sent += t.bytes_sent;
    mean.bytes_received += t.bytes_received;
    mean.dense_bytes += t.dense_bytes;
  }
  mean.bytes_sent /= count();
  mean.bytes_received /= count();
  mean.dense_bytes /= count();
  mean.collective_groups = parts_.pipelines[0]->traffic().collective_groups;
  return mean;
}

double Loop::PeelShare() const {
  GroupCompressors::PeelRecovery all;
  for (const AggregationScheme* scheme : parts_.schemes) {
    const GroupCompressors::PeelRecovery& r = scheme->peel_recovery();
    all.inserted += r.inserted;
    all.recovered += r.recovered;
    all.settlements += r.settlements;
  }
  return all.settlements > 0 && all.inserted > 0 ? all.share() : -1.0;
}

std::optional<Evaluation> Loop::TimedEvaluate(bool whole_test_set) {
  const absl::Time start = absl::Now();
  std::optional<Evaluation> eval = workload_.Evaluate(whole_test_set);
  eval_seconds_ += absl::ToDoubleSeconds(absl::Now() - start);
  return eval;
}

absl::StatusOr<TrainingSummary> Loop::Run(const std::function<void(const Progress&)>& progress) {
  const int64_t steps_per_epoch = config_.run.steps_per_epoch();
  const int64_t total = steps_per_epoch * config_.run.epochs();
  TrainingSummary summary;
  summary.resumed_from_step = config_.first_step;
  StepStats stats(absl::Now());
  auto residual_norm = [&] { return ResidualNormOf(parts_.schemes[0]->SaveState()); };
  const auto divergence_of = [&](const absl::Status& st) {
    return config_.divergence_of ? config_.divergence_of(st) : DivergenceOf(st);
  };
  for (int64_t step = config_.first_step; step < total; ++step) {
    const int64_t epoch = step / steps_per_epoch;
    const int64_t in_epoch = step % steps_per_epoch;
    const absl::Time step_start = absl::Now();
    double loss = 0;
    absl::Status st;
    try {
      st = Step(step, &loss);
    } catch (const c10::Error& e) {
      return absl::InternalError(absl::StrCat("step ", step, ": LibTorch: ", e.what_without_backtrace()));
    }
    if (!st.ok()) {
      std::optional<Divergence> diverged = divergence_of(st);
      if (!diverged.has_value()) return absl::Status(st.code(), absl::StrCat("step ", step, ": ", st.message()));
      // The run ends here, with the steps done; nothing is checkpointed
      // (the last checkpoint holds a model from before the divergence).
      summary.diverged = std::move(diverged);
      summary.final_test_accuracy = std::numeric_limits<double>::quiet_NaN();
      summary.final_test_loss = std::numeric_limits<double>::quiet_NaN();
      summary.judged_by_loss = workload_.judged_by_loss();
      summary.eval_seconds = eval_seconds_;
      stats.Summarize(step, &summary);
      if (config_.at_divergence) config_.at_divergence();
      return summary;
    }
    const double seconds = absl::ToDoubleSeconds(absl::Now() - step_start);
    const StepReport report = stats.Add(step, seconds, loss, MeanTraffic(), PhasesOf(parts_.pipelines[0]->timeline()));
    if (config_.on_step) config_.on_step(step, report, apply_begin_, apply_end_);
    // The curve: after every eval_every steps and after the last one.
    const int every = config_.eval_every;
    if (every > 0 && ((step + 1) % every == 0 || step + 1 == total)) {
      CurvePoint point;
      point.step = step + 1;
      point.elapsed_seconds = stats.ElapsedSeconds();
      point.bytes_sent = stats.total_bytes_sent();
      if (std::optional<Evaluation> eval = TimedEvaluate(/*whole_test_set=*/false); eval.has_value()) {
        point.test_accuracy = eval->accuracy;
        point.test_loss = eval->loss;
        summary.curve.push_back(point);
      }
    }
    if (config_.after_step) {
      if (absl::Status after = config_.after_step(step); !after.ok()) return after;
    }
    const bool end_of_epoch = in_epoch + 1 == steps_per_epoch;
    if (end_of_epoch || (config_.report_every > 0 && (step + 1) % config_.report_every == 0)) {
      Progress p = stats.TakeWindow(step, static_cast<int>(epoch + 1), residual_norm());
      p.peel_recovered_share = PeelShare();
      if (end_of_epoch) {
        p.end_of_epoch = true;
        if (std::optional<Evaluation> eval = TimedEvaluate(/*whole_test_set=*/true); eval.has_value()) {
          p.test_accuracy = eval->accuracy;
          p.test_loss = eval->loss;
        }
        summary.epochs.push_back(p);
      }
      if (progress) progress(p);
    }
  }
  if (config_.at_end) {
    if (absl::Status end = config_.at_end(total); !end.ok()) return end;
  }
  stats.Summarize(total, &summary);
  summary.peel_recovered_share = PeelShare();
  summary.warnings = config_.warnings;
  summary.eval_seconds = eval_seconds_;
  const std::optional<Evaluation> final_eval = workload_.Evaluate(/*whole_test_set=*/true);
  summary.final_test_accuracy = final_eval.has_value() ? final_eval->accuracy : -1;  // -1: no test set
  summary.final_test_loss = final_eval.has_value() ? final_eval->loss : -1;
  summary.judged_by_loss = workload_.judged_by_loss();
  AddEndOfRunWarnings(workload_.loss_classes(), &summary);
  return summary;
}

}  // namespace

absl::StatusOr<TrainingSummary> RunStepLoop(Workload& workload, const Participants& participants,
                                            const StepLoopConfig& config,
                                            const std::function<void(const Progress&)>& progress) {
  if (participants.pipelines.empty() || participants.pipelines.size() != participants.schemes.size() ||
      participants.pipelines.size() != participants.ranks.size()) {
    return absl::InvalidArgumentError(absl::StrCat("a step loop needs one pipeline, scheme and rank per participant; "
                                                   "got ", participants.pipelines.size(), ", ",
                                                   participants.schemes.size(), " and ", participants.ranks.size()));
  }
  if (config.run.steps_per_epoch() < 1) return absl::InvalidArgumentError("the run has no steps per epoch");
  Loop loop(workload, participants, config);
  return loop.Run(progress);
}

}  // namespace sketchfuse
