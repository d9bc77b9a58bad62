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
#include "worker/training/make_workload.h"
#include "worker/training/step_loop.h"
#include "worker/training/workloads.h"
#include "worker/virtual/loopback_shards.h"
#include "worker/worker_run.h"

namespace sketchfuse {
namespace {

std::string WorkerName(uint32_t rank) { return absl::StrCat("virtual-", rank); }

// `status` with its divergence (if any) naming `worker` when it names none.
absl::Status NamingWorker(const absl::Status& status, const std::string& worker) {
  std::optional<Divergence> divergence = DivergenceOf(status);
  if (!divergence.has_value() || !divergence->worker.empty()) return status;
  divergence->worker = worker;
  return DivergenceError(*divergence);
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

  std::unique_ptr<TorchWorkload> workload;
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
    return absl::InvalidArgumentError(absl::StrCat("--virtual_workers trains the LibTorch models; workload '", run.workload(),
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
  if (absl::Status st = DescribeRun(world, &derived, s.config.corpus_dir); !st.ok()) return st;
  if (RunFingerprint(derived) != RunFingerprint(run)) {
    return absl::InvalidArgumentError(absl::StrCat("the run does not match the model for ", world,
                                                   " workers: ", DiffRunConfigs(run, derived)));
  }

  absl::StatusOr<v1::JobConfig> job = MakeJobConfig(s.config.job, world, run, s.config.round_deadline_ms,
                                                     static_cast<uint32_t>(s.config.shards));
  if (!job.ok()) return job.status();
  s.job = *std::move(job);
  s.fit_warnings = JobFitWarnings(s.job);

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
    absl::StatusOr<v1::JoinReply> joined = LoopbackJoinReply(s.job, rank, s.config.shards);
    if (!joined.ok()) return joined.status();
    SchemeEnvironment environment;
    if (s.shards != nullptr) environment.transport = s.shards->Transports();
    if (s.group != nullptr) {
      s.collectives.push_back(s.group->Rank(static_cast<int>(rank)));
      environment.collective = s.collectives.back().get();
    }
    absl::StatusOr<BuiltScheme> built = MakeScheme(*joined, std::move(environment));
    if (!built.ok()) return built.status();
    s.schemes.push_back(std::move(built->scheme));
    absl::StatusOr<std::unique_ptr<StepPipeline>> pipeline =
        StepPipeline::Create(layer_sizes, GroupLayouts(s.job), s.schemes.back().get());
    if (!pipeline.ok()) return pipeline.status();
    s.pipelines.push_back(*std::move(pipeline));
  }

  TorchWorkloadConfig workload;
  workload.run = run;
  workload.world = world;
  for (uint32_t rank = 0; rank < world; ++rank) {
    workload.ranks.push_back(rank);
    workload.pipelines.push_back(s.pipelines[rank].get());
  }
  workload.data_dir = s.config.data_dir;
  workload.corpus_dir = s.config.corpus_dir;
  workload.eval_examples = s.config.eval_examples;
  workload.inject_nan_gradient_at_step = s.config.inject_nan_gradient_at_step;
  workload.inject_nan_participant = s.config.inject_nan_gradient_worker;
  absl::StatusOr<std::unique_ptr<TorchWorkload>> made = MakeTorchWorkload(std::move(workload));
  if (!made.ok()) return made.status();
  s.workload = *std::move(made);
  return std::unique_ptr<VirtualWorkers>(new VirtualWorkers(std::move(state)));
}

absl::StatusOr<TrainingSummary> VirtualWorkers::Run(const std::function<void(const Progress&)>& progress) {
  State& s = *state_;
  const uint32_t world = s.config.workers;
  StepLoopConfig loop;
  loop.run = s.config.run;
  loop.world = world;
  loop.eval_every = s.config.eval_every;
  loop.report_every = s.config.report_every;
  loop.collective_timeout = s.config.collective_timeout;
  loop.warnings = s.fit_warnings;
  // Stops every worker with `why` (worker `rank`'s): the exchanges waiting
  // on it fail at once instead of at their deadlines.
  loop.on_failure = [&s](uint32_t rank, const absl::Status& why) {
    const absl::Status named = NamingWorker(why, WorkerName(rank));
    if (s.group != nullptr) s.group->Abort(named);
    for (auto& pipeline : s.pipelines) pipeline->Abort(named);
    return named;
  };
  Participants participants;
  for (uint32_t rank = 0; rank < world; ++rank) {
    participants.pipelines.push_back(s.pipelines[rank].get());
    participants.schemes.push_back(s.schemes[rank].get());
    participants.ranks.push_back(rank);
  }
  return RunStepLoop(*s.workload, participants, loop, progress);
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
  header.optimizer = run.optimizer();
  header.run = RunFingerprint(run);
  return header;
}

int64_t VirtualWorkers::total_steps() const {
  return static_cast<int64_t>(state_->config.run.steps_per_epoch()) * state_->config.run.epochs();
}

const std::vector<std::string>& VirtualWorkers::fit_warnings() const { return state_->fit_warnings; }

std::vector<float> VirtualWorkers::FlatParameters() const { return state_->workload->FlatParameters(); }

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
