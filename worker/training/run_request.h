// What a worker is asked to run, checked and turned into the run
// configuration the job agrees on (v1.RunConfig): the worker daemon fills a
// RunRequest from its flags, and every rule about which values go together
// lives here, where it is tested, not in the daemon's main.
#ifndef SKETCHFUSE_WORKER_TRAINING_RUN_REQUEST_H_
#define SKETCHFUSE_WORKER_TRAINING_RUN_REQUEST_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/job_config.pb.h"

namespace sketchfuse {

// The run's settings as given (the worker's flags of the same names).
struct RunRequest {
  int world_size = 0;
  std::string workload = "mlp";
  std::string scheme = "sketch_ps";
  // Empty: the scheme's default compressor.
  std::string compressor;
  bool second_round = false;
  std::string fusion = "optimal";
  // The most elements of a partition of a fused group (RunConfig's field);
  // unset: the job's (the default for its shards, see job_plan.h).
  std::optional<uint64_t> partition_elements;
  uint64_t seed = 1;
  int batch_size = 64;
  double learning_rate = 0.05;
  // The schedule (v1::RunConfig's fields of the same names): 0, 0 is none.
  int lr_base_workers = 0;
  int lr_warmup_steps = 0;
  // v1::RunConfig residual_in_rate_units; a run without error feedback
  // records false (it keeps no residual).
  bool residual_in_rate_units = true;
  // SGD's momentum; unset: 0.9 for sgd, 0 for an Adam-family optimizer
  // (which keeps its own first moment; a momentum above 0 is refused).
  std::optional<double> momentum;
  // The optimizer spec (worker/training/optimizer_spec.h): "sgd" (or
  // empty), "adam[:...]", "adamw[:...]".
  std::string optimizer;
  // The rate's shape (v1::RunConfig lr_schedule): "constant" (or empty) or
  // "cosine", which decays to lr_final_fraction of the peak.
  std::string lr_schedule;
  double lr_final_fraction = 0.1;
  // "" or "worker" (momentum correction), "update" (global momentum):
  // v1::RunConfig.momentum_at.
  std::string momentum_at;
  bool error_feedback = true;
  double release_cap = 1.0;
  int epochs = 2;
  int train_examples = 0;
  int test_examples = 0;
  // Synthetic workloads only.
  int synthetic_steps = 20;
  double backward_ns_per_element = 2.0;
  // The char_lm workload's corpus (worker/training/text_corpus.h); empty:
  // Debian's fortunes.
  std::string corpus_dir;
  // "cpu", "gpu" or "auto" (gpu for a synthetic workload whose scheme runs
  // there, when this machine has a usable GPU; cpu otherwise).
  std::string device = "auto";
};

// Tells whether this machine can run a GPU worker (OK) or why not.
using GpuCheck = std::function<absl::Status()>;

// The run configuration of `request`, described (layer sizes, steps per
// epoch: worker/training/workloads.h DescribeRun). INVALID_ARGUMENT naming
// the flag (--world_size, --scheme, --compressor, --device, ...) for a value
// out of range or settings that do not go together (an unknown scheme, a
// compressor of another family, a second round where the scheme has none,
// a device the scheme or workload cannot use). `gpu` decides device=auto
// (by default worker/gpu/device_memory.h's CheckGpuWorker); device=gpu is
// not checked against this machine, so a launcher may write a GPU job's
// configuration on a machine without one.
absl::StatusOr<v1::RunConfig> BuildRunConfig(const RunRequest& request, const GpuCheck& gpu = nullptr);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_TRAINING_RUN_REQUEST_H_
