// The worker daemon's flags (defined in worker_flags.cc, parsed by
// sketchfuse_worker_main.cc) and what they build: the run, one worker's
// settings, or the settings of a job of virtual workers. Each error names
// the flag.
#ifndef SKETCHFUSE_WORKER_WORKER_FLAGS_H_
#define SKETCHFUSE_WORKER_WORKER_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "proto/job_config.pb.h"
#include "worker/virtual/virtual_workers.h"
#include "worker/worker_run.h"

ABSL_DECLARE_FLAG(std::string, coordinator);
ABSL_DECLARE_FLAG(std::string, job);
ABSL_DECLARE_FLAG(std::string, worker_id);
ABSL_DECLARE_FLAG(int, world_size);
ABSL_DECLARE_FLAG(std::string, workload);
ABSL_DECLARE_FLAG(int, synthetic_steps);
ABSL_DECLARE_FLAG(double, backward_ns_per_element);
ABSL_DECLARE_FLAG(std::string, device);
ABSL_DECLARE_FLAG(std::string, scheme);
ABSL_DECLARE_FLAG(std::string, compressor);
ABSL_DECLARE_FLAG(bool, second_round);
ABSL_DECLARE_FLAG(std::string, collective);
ABSL_DECLARE_FLAG(std::string, collective_host);
ABSL_DECLARE_FLAG(int, collective_device);
ABSL_DECLARE_FLAG(int, collective_timeout_s);
ABSL_DECLARE_FLAG(int, probe_every);
ABSL_DECLARE_FLAG(std::string, fusion);
ABSL_DECLARE_FLAG(std::string, partition_elements);
ABSL_DECLARE_FLAG(int, num_shards);
ABSL_DECLARE_FLAG(int, epochs);
ABSL_DECLARE_FLAG(int, batch_size);
ABSL_DECLARE_FLAG(double, learning_rate);
ABSL_DECLARE_FLAG(int, lr_base_workers);
ABSL_DECLARE_FLAG(int, lr_warmup_steps);
ABSL_DECLARE_FLAG(bool, residual_in_rate_units);
ABSL_DECLARE_FLAG(std::string, momentum);
ABSL_DECLARE_FLAG(std::string, optimizer);
ABSL_DECLARE_FLAG(std::string, lr_schedule);
ABSL_DECLARE_FLAG(double, lr_final_fraction);
ABSL_DECLARE_FLAG(bool, error_feedback);
ABSL_DECLARE_FLAG(double, release_cap);
ABSL_DECLARE_FLAG(std::string, momentum_at);
ABSL_DECLARE_FLAG(uint64_t, seed);
ABSL_DECLARE_FLAG(int, train_examples);
ABSL_DECLARE_FLAG(int, test_examples);
ABSL_DECLARE_FLAG(std::string, data_dir);
ABSL_DECLARE_FLAG(std::string, corpus_dir);
ABSL_DECLARE_FLAG(std::string, checkpoint_dir);
ABSL_DECLARE_FLAG(int, checkpoint_every);
ABSL_DECLARE_FLAG(int, report_every);
ABSL_DECLARE_FLAG(std::string, summary_json);
ABSL_DECLARE_FLAG(int, eval_every);
ABSL_DECLARE_FLAG(int, eval_examples);
ABSL_DECLARE_FLAG(std::string, trace_file);
ABSL_DECLARE_FLAG(int, trace_steps);
ABSL_DECLARE_FLAG(int, metrics_port);
ABSL_DECLARE_FLAG(std::string, metrics_host);
ABSL_DECLARE_FLAG(std::string, token_file);
ABSL_DECLARE_FLAG(std::string, tls_ca);
ABSL_DECLARE_FLAG(std::string, tls_cert);
ABSL_DECLARE_FLAG(std::string, tls_key);
ABSL_DECLARE_FLAG(int, join_timeout_s);
ABSL_DECLARE_FLAG(int, push_timeout_s);
ABSL_DECLARE_FLAG(int, push_attempts);
ABSL_DECLARE_FLAG(std::string, inject_faults);
ABSL_DECLARE_FLAG(int64_t, inject_nan_gradient_at_step);
ABSL_DECLARE_FLAG(int, threads);
ABSL_DECLARE_FLAG(std::string, write_job_config);
ABSL_DECLARE_FLAG(int, round_deadline_ms);
ABSL_DECLARE_FLAG(int, virtual_workers);
ABSL_DECLARE_FLAG(int, inject_nan_gradient_worker);
ABSL_DECLARE_FLAG(int, virtual_shards);
ABSL_DECLARE_FLAG(std::string, list_schemes);
ABSL_DECLARE_FLAG(bool, print_route);

namespace sketchfuse {

// The run the flags ask for (worker/training/run_request.h checks it);
// --virtual_workers=W sets its world size (INVALID_ARGUMENT if --world_size
// says another).
absl::StatusOr<v1::RunConfig> RunFromFlags();

// One worker's settings (CheckWorkerRunConfig checks them).
absl::StatusOr<WorkerRunConfig> WorkerRunConfigFromFlags(const v1::RunConfig& run);

// The settings of --virtual_workers; INVALID_ARGUMENT naming a flag of a
// worker process that does not apply to it (--coordinator, --checkpoint_dir,
// --trace_file, --metrics_port, --inject_faults). --collective_timeout_s is
// both the in-process collective's limit and the in-process shards' round
// deadline (clamped to 2^32 - 1 ms).
absl::StatusOr<VirtualWorkersConfig> VirtualWorkersConfigFromFlags(const v1::RunConfig& run);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_WORKER_FLAGS_H_
