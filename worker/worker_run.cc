#include "worker/worker_run.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "proto/run_config.h"
#include "worker/core/divergence.h"
#include "worker/pipeline/job_plan.h"
#include "worker/schemes/scheme_factory.h"
#include "worker/schemes/scheme_registry.h"
#include "worker/training/workloads.h"

namespace sketchfuse {
namespace {

// How often a worker looks for another worker's divergence notice.
constexpr absl::Duration kDivergencePoll = absl::Seconds(1);

// Where a worker keeps the proof of its rank (server/worker_proof.h) across
// a restart: next to its checkpoint, which it resumes from (a restarted
// worker without the proof cannot join its job again).
std::string WorkerProofPath(const WorkerRunConfig& c) { return absl::StrCat(c.checkpoint_dir, "/", c.worker_id, ".proof"); }

// The kept proof, or "" when there is none (no checkpoint directory, or no
// Join yet).
absl::StatusOr<std::string> KeptWorkerProof(const WorkerRunConfig& c) {
  if (c.checkpoint_dir.empty() || !std::filesystem::exists(WorkerProofPath(c))) return std::string();
  absl::StatusOr<std::string> kept = ReadFlagFile(WorkerProofPath(c), "worker proof");
  if (!kept.ok()) return kept.status();
  return std::string(absl::StripAsciiWhitespace(*kept));
}

// Writes `proof` to WorkerProofPath (owner-only, replaced whole), creating
// the checkpoint directory if need be.
absl::Status KeepWorkerProof(const WorkerRunConfig& c, const std::string& proof) {
  std::error_code error;
  std::filesystem::create_directories(c.checkpoint_dir, error);
  const std::string path = WorkerProofPath(c), tmp = path + ".tmp";
  // Created owner-only: the proof lets its holder act as this rank.
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, S_IRUSR | S_IWUSR);
  const std::string line = proof + "\n";
  const bool written = fd >= 0 && write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  if (fd >= 0) close(fd);
  if (!written) return absl::DataLossError(absl::StrCat("cannot write the worker proof '", tmp, "'"));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::DataLossError(absl::StrCat("cannot rename '", tmp, "' to '", path, "'"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteSummary(const std::string& json, const std::string& path) {
  std::cout << "summary " << json << std::endl;
  if (path.empty()) return absl::OkStatus();
  std::ofstream out(path);
  out << json << "\n";
  out.close();
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write --summary_json '", path, "'"));
  return absl::OkStatus();
}

std::string WorkerUsage() {
  return absl::StrCat(
      "One worker of a SketchFuse job: trains a model on its shard of Fashion-MNIST and aggregates\n"
      "fused, compressed gradients through the job's servers or among the workers.\n"
      "Usage: sketchfuse_worker --coordinator=HOST:PORT --worker_id=ID --world_size=W [--scheme=sketch_ps]\n"
      "       sketchfuse_worker --write_job_config=job.json --world_size=W [run flags]\n"
      "Exit status: 0 done; 2 error; 3 the run diverged. A NaN or infinity in a step's loss, a group's fused\n"
      "gradient or its aggregated update stops the worker at that step; it announces the divergence through the\n"
      "coordinator, and every other worker of the job stops within about a second (at most its collective\n"
      "timeout or push deadline if the coordinator cannot be reached). Each writes its summary, whose\n"
      "\"diverged\" names the step, the group and the worker, and exits with 3.\n"
      "Schemes:\n",
      SchemesHelp());
}

absl::Status CheckWorkerRunConfig(const WorkerRunConfig& c) {
  if (c.coordinator.empty()) return absl::InvalidArgumentError("--coordinator is required");
  if (c.worker_id.empty()) return absl::InvalidArgumentError("--worker_id is required");
  if (c.join_timeout < absl::Seconds(1) || c.retry.push_deadline < absl::Seconds(1) || c.retry.max_attempts < 1 ||
      c.collective.timeout < absl::Seconds(1) || c.probe_every < 1) {
    return absl::InvalidArgumentError(
        "--join_timeout_s, --push_timeout_s, --push_attempts, --collective_timeout_s and --probe_every must be >= 1");
  }
  if (c.eval_every < 0 || c.eval_examples < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--eval_every must be >= 0 and --eval_examples >= 1; got ",
                                                   c.eval_every, " and ", c.eval_examples));
  }
  if (c.trace_steps < 1) return absl::InvalidArgumentError(absl::StrCat("--trace_steps must be >= 1; got ", c.trace_steps));
  if (c.collective.backend != "gloo" && c.collective.backend != "nccl") {
    return absl::InvalidArgumentError(absl::StrCat("--collective must be gloo or nccl; got '", c.collective.backend, "'"));
  }
  if (c.collective.backend == "nccl" && !NcclBackendBuilt()) {
    return absl::InvalidArgumentError("--collective=nccl: this build has no NCCL (CPU-only build); use gloo");
  }
  if (c.collective.hostname.empty()) return absl::InvalidArgumentError("--collective_host is empty");
  if (c.metrics_port < -1 || c.metrics_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics_port must be -1 (off) or in [0, 65535]; got ", c.metrics_port));
  }
  return absl::OkStatus();
}

std::string ProgressLine(const std::string& worker_id, int64_t total_steps, const Progress& p) {
  std::string line = absl::StrFormat("%s epoch %d step %d/%d loss %.4f step %.1f ms sent %.1f KiB/step ratio %.1fx",
                                     worker_id, p.epoch, p.step, total_steps, p.train_loss, 1e3 * p.step_seconds,
                                     p.bytes_sent_per_step / 1024.0, p.compression_ratio);
  if (p.end_of_epoch && p.test_accuracy >= 0) {
    absl::StrAppend(&line, absl::StrFormat(" test accuracy %.2f%% test loss %.4f", 100 * p.test_accuracy, p.test_loss));
  }
  return line;
}

absl::StatusOr<std::unique_ptr<WorkerRun>> WorkerRun::Join(WorkerRunConfig config) {
  if (absl::Status s = CheckWorkerRunConfig(config); !s.ok()) return s;
  if (!config.log) config.log = [](const std::string&) {};
  if (!config.warn) config.warn = [](const std::string&) {};
  std::unique_ptr<WorkerRun> run(new WorkerRun(std::move(config)));
  WorkerRunConfig& c = run->config_;
  if (c.metrics_port >= 0) {
    absl::StatusOr<std::unique_ptr<MetricsEndpoint>> endpoint = MetricsEndpoint::Start(c.metrics_host, c.metrics_port);
    if (!endpoint.ok()) return endpoint.status();
    run->metrics_endpoint_ = *std::move(endpoint);
    run->metrics_ = std::make_unique<WorkerMetrics>(run->metrics_endpoint_->registry());
    c.log(absl::StrCat(c.worker_id, " serves metrics on ", c.metrics_host, ":", run->metrics_endpoint_->port()));
  }
  // A restarted worker joins again with the proof of its rank.
  absl::StatusOr<std::string> kept_proof = KeptWorkerProof(c);
  if (!kept_proof.ok()) return kept_proof.status();
  c.channel.worker_proof = *kept_proof;
  run->coordinator_ = std::make_unique<CoordinatorClient>(c.coordinator, c.job, c.worker_id, c.channel);
  absl::StatusOr<v1::JoinReply> joined = run->coordinator_->Join(c.run, c.join_timeout);
  if (!joined.ok()) return joined.status();
  run->joined_ = *std::move(joined);
  // Every later call (pushes, the collective's rendezvous) proves the rank.
  c.channel.worker_proof = run->joined_.worker_proof();
  if (!c.checkpoint_dir.empty() && !c.channel.worker_proof.empty() && c.channel.worker_proof != *kept_proof) {
    if (absl::Status kept = KeepWorkerProof(c, c.channel.worker_proof); !kept.ok()) return kept;
  }
  run->coordinator_->StartHeartbeats(absl::Seconds(2));
  const v1::JoinReply& j = run->joined_;
  const uint32_t kept = j.job().finished_rounds_kept() > 0 ? j.job().finished_rounds_kept() : 4;
  if (!c.checkpoint_dir.empty() && (c.checkpoint_every < 1 || static_cast<uint32_t>(c.checkpoint_every) > kept)) {
    return absl::InvalidArgumentError(absl::StrCat("--checkpoint_every must be in [1, ", kept, "] (the servers keep ",
                                                   kept, " finished rounds for a resumed worker to replay); got ",
                                                   c.checkpoint_every));
  }
  c.log(absl::StrCat(c.worker_id, " joined job '", j.job().job(), "' as rank ", j.rank(), " of ", j.world_size(), " (",
                     j.job().groups_size(), " groups, ", j.shards_size(), " shards, run ", j.fingerprint(), ")"));
  run->fit_warnings_ = JobFitWarnings(j.job());
  for (const std::string& warning : run->fit_warnings_) c.warn(absl::StrCat(c.worker_id, " warning: ", warning));

  // The decentralized route: every worker joins the collective group at
  // start-up (auto's fallback is then always ready).
  if (NeedsCollective(c.run.scheme())) {
    c.collective.prefix = absl::StrCat("collective/", j.fingerprint());
    absl::StatusOr<std::unique_ptr<Collective>> made = MakeCollective(
        c.collective, *run->coordinator_, static_cast<int>(j.rank()), static_cast<int>(j.world_size()));
    if (!made.ok()) return made.status();
    run->collective_ = *std::move(made);
    c.log(absl::StrCat(c.worker_id, " joined the ", run->collective_->backend(), " collective group as rank ",
                       run->collective_->rank(), " of ", run->collective_->size()));
  }
  SchemeEnvironment environment;
  environment.rpc = c.channel;
  environment.retry = c.retry;
  environment.collective = run->collective_.get();
  environment.hybrid.probe_every = c.probe_every;
  const std::string worker_id = c.worker_id;
  auto log = c.log;
  environment.hybrid.log = [worker_id, log](const std::string& line) { log(absl::StrCat(worker_id, " ", line)); };
  absl::StatusOr<BuiltScheme> built = MakeScheme(j, std::move(environment));
  if (!built.ok()) return built.status();
  run->scheme_ = std::move(built->scheme);
  run->transport_ = built->transport;

  // A divergence anywhere stops the whole job: the worker that sees it posts
  // this run's notice; every worker watches for it (Run) and, when a step
  // fails because a peer left, asks whether that peer diverged.
  run->notice_ = std::make_unique<DivergenceNotice>(run->coordinator_.get(), absl::StrCat("diverged/", j.fingerprint()));
  std::function<void(const StepReport&)> on_step;
  if (WorkerMetrics* metrics = run->metrics_.get(); metrics != nullptr) {
    on_step = [metrics](const StepReport& step) { metrics->OnStep(step); };
  }
  if (IsSyntheticWorkload(c.run.workload())) {
    SyntheticConfig synthetic;
    synthetic.joined = j;
    synthetic.report_every = c.report_every;
    synthetic.trace_path = c.trace_path;
    synthetic.trace_steps = c.trace_steps;
    synthetic.on_step = on_step;
    absl::StatusOr<std::unique_ptr<SyntheticRunner>> created = SyntheticRunner::Create(synthetic, run->scheme_.get());
    if (!created.ok()) return created.status();
    run->synthetic_ = *std::move(created);
    return run;
  }
  TrainerConfig trainer;
  trainer.joined = j;
  trainer.worker_id = c.worker_id;
  trainer.eval_every = c.eval_every;
  trainer.eval_examples = c.eval_examples;
  DivergenceNotice* notice = run->notice_.get();
  trainer.posted_divergence = [notice] { return notice->Check(); };
  trainer.inject_nan_gradient_at_step = c.inject_nan_gradient_at_step;
  trainer.data_dir = c.data_dir;
  trainer.corpus_dir = c.corpus_dir;
  if (!c.checkpoint_dir.empty()) {
    trainer.checkpoint_path = absl::StrCat(c.checkpoint_dir, "/", c.worker_id, ".ckpt");
    trainer.checkpoint_every = c.checkpoint_every;
  }
  trainer.report_every = c.report_every;
  trainer.trace_path = c.trace_path;
  trainer.trace_steps = c.trace_steps;
  trainer.on_step = on_step;
  absl::StatusOr<std::unique_ptr<Trainer>> created = Trainer::Create(trainer, run->scheme_.get());
  if (!created.ok()) return created.status();
  run->trainer_ = *std::move(created);
  return run;
}

WorkerRun::~WorkerRun() = default;

absl::StatusOr<TrainingSummary> WorkerRun::Run(const std::function<void(const Progress&)>& report) {
  const std::string& worker_id = config_.worker_id;
  WorkerMetrics* metrics = metrics_.get();
  const std::function<void(const Progress&)> progress = [metrics, &report](const Progress& p) {
    if (metrics != nullptr) metrics->OnProgress(p);
    if (report) report(p);
  };
  absl::StatusOr<TrainingSummary> summary;
  if (synthetic_ != nullptr) {
    summary = synthetic_->Run(progress);
  } else {
    // Another worker's divergence stops this one's training at its current
    // step, without waiting for exchanges that wait on the worker that
    // left. It ends before the trainer returns.
    DivergenceNotice watch(coordinator_.get(), absl::StrCat("diverged/", joined_.fingerprint()));
    Trainer* stoppable = trainer_.get();
    auto warn = config_.warn;
    watch.Watch(kDivergencePoll, [stoppable, worker_id, warn](const Divergence& d) {
      if (d.worker == worker_id) return;  // its own, posted as it stops
      warn(absl::StrCat(worker_id, " stops: ", d.Describe()));
      stoppable->Abort(DivergenceError(d));
    });
    summary = trainer_->Run(progress);
  }
  if (!summary.ok()) return summary;
  summary->warnings.insert(summary->warnings.begin(), fit_warnings_.begin(), fit_warnings_.end());
  for (size_t i = fit_warnings_.size(); i < summary->warnings.size(); ++i) {
    config_.warn(absl::StrCat(worker_id, " warning: ", summary->warnings[i]));
  }
  if (summary->diverged.has_value() && summary->diverged->worker == worker_id) {
    // Announced first: the others stop sooner.
    if (absl::Status posted = notice_->Post(*summary->diverged); !posted.ok()) {
      config_.warn(absl::StrCat(worker_id, " could not announce its divergence to the job: ", posted.message()));
    }
  }
  return summary;
}

int RunWorker(WorkerRunConfig config, const std::string& summary_path) {
  auto fail = [](const absl::Status& status) {
    std::cerr << "sketchfuse_worker: error: " << status.message() << std::endl;
    return 2;
  };
  const std::string worker_id = config.worker_id;
  absl::StatusOr<std::unique_ptr<WorkerRun>> worker = WorkerRun::Join(std::move(config));
  if (!worker.ok()) return fail(worker.status());
  const int64_t total = (*worker)->total_steps();
  absl::StatusOr<TrainingSummary> summary =
      (*worker)->Run([&](const Progress& p) { std::cout << ProgressLine(worker_id, total, p) << std::endl; });
  if (!summary.ok()) return fail(summary.status());
  const std::string json = SummaryJson((*worker)->header(), *summary);
  if (summary->diverged.has_value()) {
    // Announced by Run; exit at once.
    std::cerr << "sketchfuse_worker: " << worker_id << " stopped: " << summary->diverged->Describe() << std::endl;
    if (absl::Status s = WriteSummary(json, summary_path); !s.ok()) fail(s);
    std::fflush(nullptr);
    std::_Exit(kExitDiverged);
  }
  for (const std::string& note : (*worker)->Notes()) std::cout << "sketchfuse_worker: " << note << std::endl;
  const absl::Status written = WriteSummary(json, summary_path);
  return written.ok() ? 0 : fail(written);
}

SummaryHeader WorkerRun::header() const {
  SummaryHeader header;
  header.worker = config_.worker_id;
  header.rank = joined_.rank();
  header.workload = config_.run.workload();
  header.scheme = config_.run.scheme();
  header.compressor = config_.run.compressor();
  header.fusion = config_.run.fusion();
  header.optimizer = config_.run.optimizer();
  header.run = RunFingerprint(config_.run);
  return header;
}

int64_t WorkerRun::total_steps() const {
  return static_cast<int64_t>(config_.run.steps_per_epoch()) * config_.run.epochs();
}

std::vector<std::string> WorkerRun::Notes() const {
  std::vector<std::string> notes;
  const std::string& id = config_.worker_id;
  if (transport_ != nullptr && (config_.retry.inject.any() || transport_->retries() > 0)) {
    notes.push_back(absl::StrCat(id, " injected ", transport_->injected_faults(), " transport faults; ",
                                 transport_->retries(), " push attempts retried"));
  }
  if (const absl::Status refusal = coordinator_->rejoin_refusal(); !refusal.ok()) {
    notes.push_back(absl::StrCat(id, " could not join the restarted coordinator again: ", refusal.message()));
  } else if (coordinator_->rejoins() > 0) {
    notes.push_back(absl::StrCat(id, " joined the restarted coordinator again (", coordinator_->rejoins(), " times)"));
  }
  return notes;
}

}  // namespace sketchfuse
