// One worker of a job, as an object: it joins the coordinator, joins the
// collective group when the scheme needs one, builds the scheme, and runs
// the workload (a LibTorch model, or a synthetic profile) with the
// divergence protocol (worker/core/divergence.h): its own divergence is
// posted to the job, another worker's stops this one. The daemon's main
// (sketchfuse_worker_main.cc) parses flags into a WorkerRunConfig, starts a
// run, prints and exits; tests may start runs in-process.
//
// NOTE: Join, Run and the accessors from one thread.
#ifndef SKETCHFUSE_WORKER_WORKER_RUN_H_
#define SKETCHFUSE_WORKER_WORKER_RUN_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/metrics_endpoint.h"
#include "proto/coordinator.pb.h"
#include "proto/job_config.pb.h"
#include "proto/rpc_channel.h"
#include "worker/collective/collective.h"
#include "worker/collective/collective_factory.h"
#include "worker/pipeline/step_stats.h"
#include "worker/rpc/coordinator_client.h"
#include "worker/rpc/divergence_notice.h"
#include "worker/rpc/grpc_ps_transport.h"
#include "worker/schemes/aggregation_scheme.h"
#include "worker/training/synthetic_runner.h"
#include "worker/training/trainer.h"
#include "worker/training/worker_metrics.h"

namespace sketchfuse {

// Everything a worker runs with (the daemon's flags of the same meaning).
struct WorkerRunConfig {
  // The run it asks for (worker/training/run_request.h BuildRunConfig).
  v1::RunConfig run;
  std::string coordinator;  // host:port
  std::string job = "sketchfuse";
  std::string worker_id;
  RpcChannelOptions channel;  // token and TLS to the coordinator and the shards
  absl::Duration join_timeout = absl::Seconds(120);
  // The centralized route's pushes (deadline, attempts, injected faults).
  RetryPolicy retry;
  // The decentralized route's group (its prefix is the run's).
  CollectiveConfig collective;
  int probe_every = 20;  // auto: steps between probes of the shards
  // The trainer's (worker/training/trainer.h TrainerConfig).
  int eval_every = 0;
  int eval_examples = 2000;
  int64_t inject_nan_gradient_at_step = -1;
  std::string data_dir;
  std::string corpus_dir;
  std::string checkpoint_dir;  // empty: no checkpoints
  int checkpoint_every = 4;
  int report_every = 50;
  std::string trace_path;
  int trace_steps = 50;
  // Prometheus metrics (GET /metrics) on metrics_host at this port; 0 picks
  // a free one; -1: none.
  int metrics_port = -1;
  std::string metrics_host = "127.0.0.1";
  // Where the run's log lines go (joins, route switches, warnings).
  std::function<void(const std::string&)> log;
  std::function<void(const std::string&)> warn;
};

// The daemon's usage text (--help): what a worker does, its exit statuses
// and the divergence protocol, and the schemes.
std::string WorkerUsage();

// OK, or INVALID_ARGUMENT naming the daemon's flag of a setting out of range
// (--coordinator and --worker_id are required; timeouts, attempts and
// probe_every >= 1; eval_every >= 0, eval_examples >= 1, trace_steps >= 1;
// metrics_port -1 or a port;
// the collective gloo or nccl, nccl only in a build with NCCL; a collective
// host).
absl::Status CheckWorkerRunConfig(const WorkerRunConfig& config);

// The progress line a worker prints: "<id> epoch E step S/T loss L step X ms
// sent K KiB/step ratio Rx" and, at an epoch's end, its test accuracy.
std::string ProgressLine(const std::string& worker_id, int64_t total_steps, const Progress& progress);

// Prints "summary <json>" and, for a non-empty `path`, writes the JSON there;
// PERMISSION_DENIED naming the path if it cannot be written.
absl::Status WriteSummary(const std::string& json, const std::string& path);

// The exit status of a run that diverged, here or on another worker (an
// error is 2).
inline constexpr int kExitDiverged = 3;

// The daemon's run of one worker: Join, Run with a ProgressLine per report,
// the run's notes, and the summary (WriteSummary, also to `summary_path`
// when set). Returns the exit status: 0 done, 2 an error (printed). A run
// that diverged exits the process at once with kExitDiverged after its
// summary: the last step's exchanges may wait on a worker that left.
int RunWorker(WorkerRunConfig config, const std::string& summary_path);

class WorkerRun {
 public:
  // Joins the job and builds everything the run needs (CheckWorkerRunConfig
  // first). The coordinator's
  // refusal (FAILED_PRECONDITION naming a differing setting), the join's
  // timeout, INVALID_ARGUMENT for a checkpoint interval the servers cannot
  // replay, or the collective's and the scheme's errors. Logs the
  // compressors that do not fit the job's world size (JobFitWarnings).
  static absl::StatusOr<std::unique_ptr<WorkerRun>> Join(WorkerRunConfig config);
  ~WorkerRun();

  // Trains (or runs the synthetic profile) to the end, calling `progress`
  // per report (after the metrics have it). A run that diverged, here or on another worker, returns OK
  // with summary.diverged set; this worker's own divergence is posted to the
  // job first. The summary's warnings start with the join's.
  absl::StatusOr<TrainingSummary> Run(const std::function<void(const Progress&)>& progress);

  const v1::JoinReply& joined() const { return joined_; }
  // The summary's header (worker, rank, workload, scheme, compressor, run).
  SummaryHeader header() const;
  // Steps in the whole run.
  int64_t total_steps() const;
  // After Run: what the centralized route's transport and the coordinator
  // client have to report (injected faults, retries, rejoins), as lines.
  std::vector<std::string> Notes() const;

 private:
  explicit WorkerRun(WorkerRunConfig config) : config_(std::move(config)) {}

  WorkerRunConfig config_;
  std::unique_ptr<MetricsEndpoint> metrics_endpoint_;
  std::unique_ptr<WorkerMetrics> metrics_;
  std::unique_ptr<CoordinatorClient> coordinator_;
  v1::JoinReply joined_;
  std::vector<std::string> fit_warnings_;
  std::unique_ptr<Collective> collective_;
  std::unique_ptr<AggregationScheme> scheme_;
  const PsTransport* transport_ = nullptr;  // the centralized route's, or null
  std::unique_ptr<DivergenceNotice> notice_;
  std::unique_ptr<Trainer> trainer_;
  std::unique_ptr<SyntheticRunner> synthetic_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_WORKER_RUN_H_
