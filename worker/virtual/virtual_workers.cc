#include "worker/virtual/virtual_workers.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <iostream>
#include <cstring>
#include <limits>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/run_config.h"
#include "server/job_config.h"
#include "torch/nn/functional.h"
#include "torch/optim/sgd.h"
#include "worker/collective/in_process_collective.h"
#include "worker/core/divergence.h"
#include "worker/pipeline/job_plan.h"
#include "worker/pipeline/step_pipeline.h"
#include "worker/schemes/scheme_factory.h"
#include "worker/schemes/scheme_registry.h"
#include "worker/training/epoch_order.h"
#include "worker/training/fashion_mnist.h"
#include "worker/training/models.h"
#include "worker/training/trainer.h"
#include "worker/training/workloads.h"
#include "worker/virtual/loopback_shards.h"
#include "worker/worker_run.h"

namespace sketchfuse {
namespace {

// How often the wait for the workers' steps looks for a worker that failed
// (a worker whose gradient diverged never reaches the others' exchanges).
constexpr absl::Duration kFailurePoll = absl::Milliseconds(100);

std::string WorkerName(uint32_t rank) { return absl::StrCat("virtual-", rank); }

// `status` with its divergence (if any) naming `worker` when it names none.
absl::Status NamingWorker(const absl::Status& status, const std::string& worker) {
  std::optional<Divergence> divergence = DivergenceOf(status);
  if (!divergence.has_value() || !divergence->worker.empty()) return status;
  divergence->worker = worker;
  return DivergenceError(*divergence);
}

bool SameUpdate(const Update& a, const Update& b) {
  return a.dense == b.dense && a.indices == b.indices && a.values.size() == b.values.size() &&
         std::memcmp(a.values.data(), b.values.data(), a.values.size() * sizeof(float)) == 0;
}

}  // namespace

struct VirtualWorkers::State {
  VirtualWorkersConfig config;
  v1::JobConfig job;
  std::vector<std::string> fit_warnings;
  // Declared in the order they are built: each outlives what is built after it.
  std::unique_ptr<LoopbackShards> shards;  // the centralized and hybrid routes'
  std::unique_ptr<InProcessGroup> group;   // the decentralized and hybrid routes'
  std::vector<std::unique_ptr<Collective>> collectives;
  std::vector<std::unique_ptr<AggregationScheme>> schemes;
  std::vector<std::unique_ptr<StepPipeline>> pipelines;

  std::shared_ptr<ClassifierImpl> model;
  std::vector<torch::Tensor> params;  // forward order
  std::unique_ptr<torch::optim::SGD> optimizer;
  std::vector<ImageDataset> train;  // by worker
  ImageDataset test, eval;
  std::vector<std::vector<int64_t>> orders;  // each worker's order of its current epoch
  std::vector<float> apply_buffer;
  // The worker whose backward pass runs now (the hooks feed its pipeline).
  std::atomic<uint32_t> current{0};
  int64_t current_step = -1;
};

VirtualWorkers::VirtualWorkers(std::unique_ptr<State> state) : state_(std::move(state)) {}

// Pipelines first (their threads may still finish an exchange), then the
// schemes, the collectives, the group and the shards. A run that stopped
// mid-step (a divergence, a failed exchange) can leave exchanges of the
// workers that had pushed waiting on rounds the others never will: the
// shards go down and the group is aborted first, so those exchanges fail now
// and the pipelines' destructors do not wait for the round deadline (or the
// collective timeout). After a whole run nothing is open, and this changes
// nothing.
VirtualWorkers::~VirtualWorkers() {
  if (state_ == nullptr) return;
  const absl::Status stopping = absl::CancelledError("the virtual workers are stopping");
  if (state_->shards != nullptr) state_->shards->GoDown(stopping);
  if (state_->group != nullptr) state_->group->Abort(stopping);
  state_->pipelines.clear();
  state_->schemes.clear();
  state_->collectives.clear();
}

absl::StatusOr<std::unique_ptr<VirtualWorkers>> VirtualWorkers::Create(VirtualWorkersConfig config) {
  auto state = std::make_unique<State>();
  State& s = *state;
  s.config = std::move(config);
  const v1::RunConfig& run = s.config.run;
  if (s.config.workers < 1) return absl::InvalidArgumentError("--virtual_workers must be >= 1");
  if (s.config.shards < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--virtual_shards must be >= 1; got ", s.config.shards));
  }
  if (IsSyntheticWorkload(run.workload())) {
    return absl::InvalidArgumentError(absl::StrCat("--virtual_workers trains mlp or cnn; workload '", run.workload(),
                                                   "' is a synthetic profile (run it with worker processes)"));
  }
  if (run.device() == "gpu") {
    return absl::InvalidArgumentError("--virtual_workers runs on the CPU; use --device=cpu");
  }
  if (s.config.eval_every < 0 || s.config.eval_examples < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--eval_every must be >= 0 and --eval_examples >= 1; got ",
                                                   s.config.eval_every, " and ", s.config.eval_examples));
  }
  absl::StatusOr<SchemeInfo> info = FindScheme(run.scheme());
  if (!info.ok()) return info.status();
  const uint32_t world = s.config.workers;
  // The run must be the one this build derives for W workers.
  v1::RunConfig derived = run;
  if (absl::Status s = DescribeRun(world, &derived); !s.ok()) return s;
  if (RunFingerprint(derived) != RunFingerprint(run)) {
    return absl::InvalidArgumentError(absl::StrCat("the run does not match the model for ", world,
                                                   " workers: ", DiffRunConfigs(run, derived)));
  }

  absl::StatusOr<v1::JobConfig> job = MakeJobConfig(s.config.job, world, run, s.config.round_deadline_ms,
                                                     static_cast<uint32_t>(s.config.shards));
  if (!job.ok()) return job.status();
  s.job = *std::move(job);
  s.fit_warnings = JobFitWarnings(s.job);
  absl::StatusOr<std::vector<int>> shard_of_group = ShardOfGroups(s.job, s.config.shards);
  if (!shard_of_group.ok()) return shard_of_group.status();

  if (info->route != Route::kDecentralized) {
    absl::StatusOr<std::unique_ptr<LoopbackShards>> shards = LoopbackShards::Create(s.job, s.config.shards);
    if (!shards.ok()) return shards.status();
    s.shards = *std::move(shards);
  }
  if (NeedsCollective(run.scheme())) {
    s.group = std::make_unique<InProcessGroup>(static_cast<int>(world), s.config.collective_timeout);
  }
  const std::vector<int64_t> layer_sizes(run.layer_sizes().begin(), run.layer_sizes().end());
  for (uint32_t rank = 0; rank < world; ++rank) {
    // The reply a coordinator would give this rank.
    v1::JoinReply joined;
    joined.set_rank(rank);
    joined.set_world_size(world);
    *joined.mutable_job() = s.job;
    for (int shard = 0; shard < s.config.shards; ++shard) {
      v1::ShardAddress* address = joined.add_shards();
      address->set_shard(shard);
      address->set_address(absl::StrCat("in-process:", shard));
    }
    for (int shard : *shard_of_group) joined.add_shard_of_group(shard);
    joined.set_fingerprint(RunFingerprint(run));
    SchemeEnvironment environment;
    if (s.shards != nullptr) environment.transport = s.shards->Transports();
    if (s.group != nullptr) {
      s.collectives.push_back(s.group->Rank(static_cast<int>(rank)));
      environment.collective = s.collectives.back().get();
    }
    absl::StatusOr<BuiltScheme> built = MakeScheme(joined, std::move(environment));
    if (!built.ok()) return built.status();
    s.schemes.push_back(std::move(built->scheme));
    absl::StatusOr<std::unique_ptr<StepPipeline>> pipeline =
        StepPipeline::Create(layer_sizes, GroupLayouts(s.job), s.schemes.back().get());
    if (!pipeline.ok()) return pipeline.status();
    s.pipelines.push_back(*std::move(pipeline));
  }

  absl::StatusOr<ImageDataset> train = LoadFashionMnist(s.config.data_dir, Split::kTrain);
  if (!train.ok()) return train.status();
  absl::StatusOr<ImageDataset> test = LoadFashionMnist(s.config.data_dir, Split::kTest);
  if (!test.ok()) return test.status();
  for (uint32_t rank = 0; rank < world; ++rank) {
    absl::StatusOr<ImageDataset> shard = TrainShardOf(run, *train, rank, world);
    if (!shard.ok()) return shard.status();
    if (shard->size() < static_cast<int64_t>(run.batch_size())) {
      return absl::InvalidArgumentError(absl::StrCat("worker ", rank, "'s shard has ", shard->size(),
                                                     " examples, fewer than a batch of ", run.batch_size()));
    }
    s.train.push_back(*std::move(shard));
  }
  s.orders.resize(world);
  s.test = run.test_examples() > 0 ? Head(*test, run.test_examples()) : *std::move(test);
  s.eval = Head(s.test, std::min<int64_t>(s.config.eval_examples, s.test.size()));

  absl::StatusOr<std::shared_ptr<ClassifierImpl>> model = MakeClassifier(run.workload(), run.seed());
  if (!model.ok()) return model.status();
  s.model = *model;
  s.params = s.model->parameters();
  s.optimizer = std::make_unique<torch::optim::SGD>(
      s.params, torch::optim::SGDOptions(run.learning_rate())
                    .momentum(MomentumPlaceOf(run) == MomentumPlace::kOptimizer ? run.momentum() : 0.0));

  // Each parameter's gradient enters the pipeline of the worker whose
  // backward pass runs, as the worker's trainer hooks do.
  const int num_params = static_cast<int>(s.params.size());
  const State* shared = state.get();
  for (int i = 0; i < num_params; ++i) {
    const int layer = num_params - 1 - i;  // layers are numbered in backward order
    const torch::Tensor* param = &s.params[i];
    s.params[i].register_hook([shared, layer, param](torch::Tensor grad) {
      const uint32_t worker = shared->current.load();
      FeedLayer(*shared->pipelines[worker], layer, *param, grad,
                layer == 0 && shared->config.inject_nan_gradient_at_step >= 0 &&
                    shared->current_step == shared->config.inject_nan_gradient_at_step &&
                    worker == shared->config.inject_nan_gradient_worker);
    });
  }
  return std::unique_ptr<VirtualWorkers>(new VirtualWorkers(std::move(state)));
}

absl::Status VirtualWorkers::Step(int64_t step, double* loss_out) {
  State& s = *state_;
  const uint32_t world = s.config.workers;
  const int64_t steps_per_epoch = s.config.run.steps_per_epoch();
  const int64_t batch = s.config.run.batch_size();
  const int64_t epoch = step / steps_per_epoch, in_epoch = step % steps_per_epoch;
  // Stops every worker with `why` (worker `rank`'s): the exchanges waiting
  // on it fail at once instead of at their deadlines.
  auto fail = [&](uint32_t rank, const absl::Status& why) {
    const absl::Status named = NamingWorker(why, WorkerName(rank));
    if (s.group != nullptr) s.group->Abort(named);
    for (auto& pipeline : s.pipelines) pipeline->Abort(named);
    return named;
  };
  s.current_step = step;
  double loss_sum = 0;
  for (uint32_t rank = 0; rank < world; ++rank) {
    if (in_epoch == 0 || s.orders[rank].empty()) {
      s.orders[rank] = EpochOrder(s.config.run.seed(), static_cast<int>(rank), epoch, s.train[rank].size());
    }
    torch::Tensor index = torch::from_blob(s.orders[rank].data() + in_epoch * batch, {batch}, torch::kInt64).clone();
    StepPipeline& pipeline = *s.pipelines[rank];
    pipeline.BeginStep(static_cast<uint64_t>(step));
    s.current.store(rank);
    for (torch::Tensor& p : s.params) p.mutable_grad() = torch::Tensor();
    torch::Tensor loss = torch::nn::functional::cross_entropy(
        s.model->forward(s.train[rank].images.index_select(0, index)), s.train[rank].labels.index_select(0, index));
    const double value = loss.item<double>();
    if (absl::Status sane = CheckLoss(step, value, kNumClasses); !sane.ok()) return fail(rank, sane);
    loss_sum += value;
    loss.backward();
    pipeline.MarkBackwardEnd();
  }
  *loss_out = loss_sum / world;

  // Every worker's updates. Each worker finishes its step on a thread of its
  // own: a scheme's Reconcile may meet the other workers (the hybrid agrees
  // on failed groups in a collective). A worker that fails by itself (its
  // gradient, or an exchange) stops the others at once.
  std::vector<absl::StatusOr<std::vector<Update>>> got(world, absl::UnknownError("not finished"));
  std::mutex mu;
  std::condition_variable changed;
  uint32_t finished = 0;  // guarded by mu
  int first_failed = -1;  // guarded by mu: the first worker whose step failed
  std::vector<std::thread> finishers;
  finishers.reserve(world);
  for (uint32_t rank = 0; rank < world; ++rank) {
    finishers.emplace_back([&, rank] {
      absl::StatusOr<std::vector<Update>> result = s.pipelines[rank]->FinishStep(s.config.collective_timeout);
      std::lock_guard<std::mutex> lock(mu);
      if (!result.ok() && first_failed < 0) first_failed = static_cast<int>(rank);
      got[rank] = std::move(result);
      ++finished;
      changed.notify_all();
    });
  }
  absl::Status failure;
  {
    std::unique_lock<std::mutex> lock(mu);
    while (finished < world && failure.ok()) {
      changed.wait_for(lock, absl::ToChronoMilliseconds(kFailurePoll),
                       [&] { return finished == world || first_failed >= 0; });
      if (finished == world) break;
      for (uint32_t rank = 0; rank < world && failure.ok(); ++rank) {
        if (absl::Status aborted = s.pipelines[rank]->aborted(); !aborted.ok()) failure = fail(rank, aborted);
      }
      if (failure.ok() && first_failed >= 0) {
        failure = fail(static_cast<uint32_t>(first_failed), got[first_failed].status());
      }
    }
  }
  for (std::thread& finisher : finishers) finisher.join();
  if (!failure.ok()) return failure;
  std::vector<std::vector<Update>> updates(world);
  for (uint32_t rank = 0; rank < world; ++rank) {
    if (got[rank].ok()) {
      updates[rank] = *std::move(got[rank]);
      continue;
    }
    // The first pipeline that stopped by itself is the one to blame.
    for (uint32_t other = 0; other < world; ++other) {
      if (absl::Status aborted = s.pipelines[other]->aborted(); !aborted.ok()) return fail(other, aborted);
    }
    return fail(rank, got[rank].status());
  }
  for (uint32_t rank = 1; rank < world; ++rank) {
    for (size_t g = 0; g < updates[0].size(); ++g) {
      if (!SameUpdate(updates[rank][g], updates[0][g])) {
        return fail(rank, absl::InternalError(absl::StrCat(
                              "step ", step, ": virtual worker ", rank, "'s update of group ", g,
                              " differs from worker 0's (every worker of a route must get the same update)")));
      }
    }
  }
  for (size_t g = 0; g < updates[0].size(); ++g) {
    if (absl::Status finite = CheckFiniteValues("update", step, static_cast<int>(g), updates[0][g].values);
        !finite.ok()) {
      return fail(0, finite);
    }
  }
  {
    torch::NoGradGuard no_grad;
    if (absl::Status set = ApplyMeanUpdates(updates[0], s.pipelines[0]->layout(), world,
                                            LearningRateAt(s.config.run, world, step), s.params, *s.optimizer,
                                            &s.apply_buffer);
        !set.ok()) {
      return set;
    }
  }
  const float rescale = ResidualRescaleAfter(s.config.run, world, step);
  for (uint32_t rank = 0; rank < world; ++rank) {
    if (absl::Status applied = s.pipelines[rank]->Applied(updates[rank], rescale); !applied.ok()) {
      return fail(rank, applied);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TrainingSummary> VirtualWorkers::Run(const std::function<void(const Progress&)>& progress) {
  State& s = *state_;
  const uint32_t world = s.config.workers;
  const int64_t steps_per_epoch = s.config.run.steps_per_epoch();
  const int64_t total = total_steps();
  TrainingSummary summary;
  StepStats stats(absl::Now());
  double eval_seconds = 0;
  // Per worker: the mean of the workers' traffic, and their peels together.
  auto traffic = [&] {
    StepTraffic mean;
    for (const auto& pipeline : s.pipelines) {
      const StepTraffic t = pipeline->traffic();
      mean.bytes_sent += t.bytes_sent;
      mean.bytes_received += t.bytes_received;
      mean.dense_bytes += t.dense_bytes;
    }
    mean.bytes_sent /= world;
    mean.bytes_received /= world;
    mean.dense_bytes /= world;
    mean.collective_groups = s.pipelines[0]->traffic().collective_groups;
    return mean;
  };
  auto peel_share = [&] {
    GroupCompressors::PeelRecovery all;
    for (const auto& scheme : s.schemes) {
      const GroupCompressors::PeelRecovery& r = scheme->peel_recovery();
      all.inserted += r.inserted;
      all.recovered += r.recovered;
      all.settlements += r.settlements;
    }
    return all.settlements > 0 && all.inserted > 0 ? all.share() : -1.0;
  };
  auto residual_norm = [&] { return ResidualNormOf(s.schemes[0]->SaveState()); };
  for (int64_t step = 0; step < total; ++step) {
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
      std::optional<Divergence> diverged = DivergenceOf(st);
      if (!diverged.has_value()) return absl::Status(st.code(), absl::StrCat("step ", step, ": ", st.message()));
      summary.diverged = std::move(diverged);
      summary.final_test_accuracy = std::numeric_limits<double>::quiet_NaN();
      summary.eval_seconds = eval_seconds;
      stats.Summarize(step, &summary);
      return summary;
    }
    const double seconds = absl::ToDoubleSeconds(absl::Now() - step_start);
    stats.Add(step, seconds, loss, traffic(), PhasesOf(s.pipelines[0]->timeline()));
    const int every = s.config.eval_every;
    if (every > 0 && ((step + 1) % every == 0 || step + 1 == total)) {
      summary.curve.push_back(CurvePointAfter(step + 1, stats, *s.model, s.eval, &eval_seconds));
    }
    const bool report = s.config.report_every > 0 && (step + 1) % s.config.report_every == 0;
    if (in_epoch + 1 == steps_per_epoch || report) {
      Progress p = stats.TakeWindow(step, static_cast<int>(epoch + 1), residual_norm());
      p.peel_recovered_share = peel_share();
      if (in_epoch + 1 == steps_per_epoch) {
        p.end_of_epoch = true;
        const Evaluation eval = TimedEvaluate(*s.model, s.test, &eval_seconds);
        p.test_accuracy = eval.accuracy;
        p.test_loss = eval.loss;
        summary.epochs.push_back(p);
      }
      if (progress) progress(p);
    }
  }
  stats.Summarize(total, &summary);
  summary.peel_recovered_share = peel_share();
  summary.warnings = s.fit_warnings;
  summary.eval_seconds = eval_seconds;
  summary.final_test_accuracy = Evaluate(*s.model, s.test, 1000).accuracy;
  AddEndOfRunWarnings(kNumClasses, &summary);
  return summary;
}

SummaryHeader VirtualWorkers::header() const {
  const v1::RunConfig& run = state_->config.run;
  SummaryHeader header;
  header.worker = absl::StrCat("virtual-x", state_->config.workers);
  header.rank = 0;
  header.workload = run.workload();
  header.scheme = run.scheme();
  header.compressor = run.compressor();
  header.fusion = run.fusion();
  header.run = RunFingerprint(run);
  return header;
}

int64_t VirtualWorkers::total_steps() const {
  return static_cast<int64_t>(state_->config.run.steps_per_epoch()) * state_->config.run.epochs();
}

const std::vector<std::string>& VirtualWorkers::fit_warnings() const { return state_->fit_warnings; }

std::vector<float> VirtualWorkers::FlatParameters() const {
  std::vector<float> out;
  for (const torch::Tensor& p : state_->params) {
    torch::Tensor c = p.detach().contiguous();
    out.insert(out.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  return out;
}

int RunVirtualWorkers(VirtualWorkersConfig config, const std::string& summary_path) {
  auto fail = [](const absl::Status& status) {
    std::cerr << "sketchfuse_worker: error: " << status.message() << std::endl;
    return 2;
  };
  const uint32_t world = config.workers;
  absl::StatusOr<std::unique_ptr<VirtualWorkers>> workers = VirtualWorkers::Create(std::move(config));
  if (!workers.ok()) return fail(workers.status());
  const SummaryHeader header = (*workers)->header();
  std::cout << "sketchfuse_worker: " << world << " virtual workers in this process (" << header.scheme << ", "
            << header.workload << ", run " << header.run << ")" << std::endl;
  for (const std::string& warning : (*workers)->fit_warnings()) {
    std::cerr << "sketchfuse_worker: " << header.worker << " warning: " << warning << std::endl;
  }
  const int64_t total = (*workers)->total_steps();
  absl::StatusOr<TrainingSummary> summary = (*workers)->Run(
      [&](const Progress& p) { std::cout << ProgressLine(header.worker, total, p) << std::endl; });
  if (!summary.ok()) return fail(summary.status());
  if (summary->diverged.has_value()) {
    std::cerr << "sketchfuse_worker: " << header.worker << " stopped: " << summary->diverged->Describe() << std::endl;
  }
  if (absl::Status written = WriteSummary(SummaryJson(header, *summary), summary_path); !written.ok()) {
    return fail(written);
  }
  return summary->diverged.has_value() ? kExitDiverged : 0;
}

}  // namespace sketchfuse
