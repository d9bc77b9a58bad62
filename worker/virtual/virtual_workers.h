// W workers of a job in one process (--virtual_workers=W): how SketchFuse
// measures 64 or 256 workers on one machine.
//
// Each virtual worker has what a worker process has: its rank, its shard of
// the data and its batches (the same as the process of that rank would
// draw), its own scheme built by MakeScheme (worker/schemes/scheme_factory.h)
// with its compressor state (residuals, velocities), and its own step
// pipeline. What the processes would share travels in process instead: the
// decentralized route runs on an InProcessGroup (Gloo's sums bit for bit, and
// its byte counts), the centralized route on LoopbackShards (the servers'
// aggregation cores, bytes counted as gRPC sends them). The job is the one a
// coordinator would hand out (MakeJobConfig, ShardOfGroups).
//
// One model serves every worker: in synchronous data parallelism the
// workers' replicas are equal, so each step runs W forward and backward
// passes on the one model (one per worker's batch, its gradients into that
// worker's pipeline, whose exchange runs on the pipeline's thread and meets
// the other workers' in the group or on the shards), then checks that every
// worker got the same updates (INTERNAL if not: the route broke its
// contract) and applies them once, as each process would
// (the trainer's ApplyMeanUpdates).
//
// So a run of W virtual workers computes what W processes compute, to the
// bit where the model's arithmetic is deterministic, while its time is the
// sum of the workers' computations on this machine's cores: step times are
// the whole job's, not one worker's. Bytes are per worker (the mean over the
// workers). Not supported: synthetic workloads, the GPU, checkpoints.
//
// Divergence: a worker's non-finite loss, gradient or update ends the run at
// that step, as it ends a job of processes; the summary names the worker
// ("virtual-<rank>").
#ifndef SKETCHFUSE_WORKER_VIRTUAL_VIRTUAL_WORKERS_H_
#define SKETCHFUSE_WORKER_VIRTUAL_VIRTUAL_WORKERS_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/job_config.pb.h"
#include "worker/pipeline/step_stats.h"

namespace sketchfuse {

struct VirtualWorkersConfig {
  // The run (worker/training/run_request.h BuildRunConfig) for `workers`
  // workers; its workload mlp or cnn, its device cpu.
  v1::RunConfig run;
  uint32_t workers = 4;
  // The centralized route's shards (in process).
  int shards = 1;
  std::string job = "virtual";
  // The shards' round deadline (the daemon sets --collective_timeout_s).
  uint32_t round_deadline_ms = 60000;
  // A collective operation's limit (a worker that never arrives).
  absl::Duration collective_timeout = absl::Minutes(10);
  // As the worker's (worker/training/trainer.h TrainerConfig).
  std::string data_dir;
  std::string corpus_dir;
  int eval_every = 0;
  int64_t eval_examples = 2000;
  int report_every = 0;
  // Tests only: in this step (>= 0), virtual worker
  // inject_nan_gradient_worker's first gradient gets a NaN.
  int64_t inject_nan_gradient_at_step = -1;
  uint32_t inject_nan_gradient_worker = 0;
};

class VirtualWorkers {
 public:
  // Builds the job, the shards, the group, every worker's scheme and
  // pipeline, the model and the data. INVALID_ARGUMENT naming the setting
  // for workers < 1, shards < 1, a synthetic workload or a GPU run; the
  // scheme's and the data's errors.
  static absl::StatusOr<std::unique_ptr<VirtualWorkers>> Create(VirtualWorkersConfig config);
  ~VirtualWorkers();

  // Trains the run's epochs (Trainer::Run's reports, curve and summary; a
  // divergence is not an error: summary.diverged says where).
  absl::StatusOr<TrainingSummary> Run(const std::function<void(const Progress&)>& progress);

  // The summary's header: worker "virtual-x<W>", rank 0.
  SummaryHeader header() const;
  int64_t total_steps() const;
  // The job's fit warnings (worker/pipeline/job_plan.h JobFitWarnings).
  const std::vector<std::string>& fit_warnings() const;
  // Parameters flattened in forward order (for tests comparing runs).
  std::vector<float> FlatParameters() const;

 private:
  struct State;
  explicit VirtualWorkers(std::unique_ptr<State> state);

  std::unique_ptr<State> state_;
};

// The worker daemon's --virtual_workers run: creates the workers, prints
// their fit warnings to standard error and a progress line per report
// (ProgressLine, as "virtual-x<W>") and the summary (WriteSummary, also to
// `summary_path` when set). Returns the daemon's exit status: 0 done, 2 an
// error (printed), 3 the run diverged.
int RunVirtualWorkers(VirtualWorkersConfig config, const std::string& summary_path);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_VIRTUAL_VIRTUAL_WORKERS_H_
