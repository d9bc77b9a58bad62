// The native side of a training front end's communication hook (the PyTorch
// DDP hook of python/sketchfuse/torch.py, through the C ABI of
// sketchfuse_c.h): each fused group the front end hands over (a DDP bucket)
// is aggregated by the decentralized scheme it names, with the same
// compressor stacks, error feedback, momentum correction, release cap and
// decode as a sketchfuse_worker's (a CollectiveScheme per group), over the
// front end's own process group (a CallbackCollective).
//
// Contract:
//  - Every rank creates its session with settings that resolve alike, adds
//    the same groups in the same order and exchanges them in the same order
//    with the same step numbers (collectives match by order).
//  - Exchange returns the MEAN over ranks of the aggregated update, dense,
//    and settles the group's error feedback as applied (a front end applies
//    what it is given). With check_finite, a non-finite gradient is
//    exchanged as zeros and FinishStep, called once per step by every rank,
//    fails on every rank alike, naming the step and the ranks: no rank is
//    left waiting in a collective the others skipped.
#ifndef SKETCHFUSE_WORKER_HOOK_HOOK_SESSION_H_
#define SKETCHFUSE_WORKER_HOOK_HOOK_SESSION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/job_config.pb.h"
#include "worker/collective/collective.h"
#include "worker/pipeline/step_apply.h"
#include "worker/rpc/coordinator_client.h"
#include "worker/schemes/aggregation_scheme.h"
#include "worker/schemes/collective_scheme.h"

namespace sketchfuse {

struct HookSettings {
  std::string scheme;
  // Resolved: the scheme's default when none was given.
  std::string compressor;
  int rank = 0;
  int world_size = 1;
  uint64_t seed = 1;
  double momentum = 0.9;
  // The optimizer the caller steps with, as the run records it
  // (worker/training/optimizer_spec.h Canonical; empty: sgd). The hook does
  // not step it; ranks and the job must agree on it.
  std::string optimizer;
  bool error_feedback = true;
  double release_cap = 1.0;
  bool second_round = false;
  bool check_finite = true;
  // Where the groups' compression state lives: "cpu", or "cuda" (device
  // memory of GPU `gpu`; the count_sketch schemes of a decentralized hook,
  // exchanged with ExchangeOnDevice).
  std::string device = "cpu";
  int gpu = 0;
  // The centralized and hybrid schemes (sketch_ps, topk_ps, dense_ps, auto):
  // the job's coordinator and how to reach it, as a sketchfuse_worker's flags.
  std::string coordinator;
  std::string job = "sketchfuse";
  std::string worker_id;  // default "hook-<rank>"
  std::string token_file, tls_ca, tls_cert, tls_key;
  // This rank's join credential (sketchfuse_worker's --join_credential_file).
  std::string join_credential_file;
  int join_timeout_s = 120;
  int push_timeout_s = 60;
  int push_attempts = 5;
  int probe_every = 20;
  // The shards a job config written from these settings (HookJobConfig,
  // sf_write_job_config) is partitioned for; a joined session takes the
  // job's partitions whatever it says.
  int num_shards = 1;
  // The run's partition bound (RunConfig.partition_elements); unset: the
  // job's. A joined session that states one must hold the job's.
  std::optional<uint64_t> partition_elements;

  bool joins_coordinator() const { return !coordinator.empty(); }
  bool on_gpu() const { return device == "cuda"; }
};

// Parses "key=value" lines (keys: those of HookSettings; scheme and
// world_size required) and checks them as a worker's flags are checked:
// INVALID_ARGUMENT naming the key for an unknown key, a malformed value, an
// unknown scheme, a compressor that does not fit the scheme, a centralized or
// hybrid scheme without a coordinator or a decentralized one with one.
absl::StatusOr<HookSettings> ParseHookSettings(const std::string& text);
// The settings as "key=value" lines in a fixed order (what ranks compare;
// rank and worker_id differ by rank).
std::string HookSettingsText(const HookSettings& settings);
// The run a group is aggregated under (no layers: the caller adds them).
v1::RunConfig HookRun(const HookSettings& settings);
// The run of a job over layers of `layer_sizes` (backward order), planned as
// a worker's: what the job configuration and the coordinator's join hold.
v1::RunConfig HookJobRun(const HookSettings& settings, const std::vector<uint64_t>& layer_sizes);
// The job configuration the servers of a centralized or hybrid hook job read
// (sketchfuse_server --job_config), as sketchfuse_worker --write_job_config
// writes it.
absl::StatusOr<v1::JobConfig> HookJobConfig(const HookSettings& settings, const std::vector<uint64_t>& layer_sizes);

struct HookStats {
  uint64_t steps = 0;  // distinct step numbers exchanged
  uint64_t exchanges = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t dense_bytes = 0;
  double compress_s = 0, communicate_s = 0, decode_s = 0, check_s = 0;
};

class HookSession {
 public:
  // INVALID_ARGUMENT when the collective's size or rank differ from the
  // settings'. The collective is owned.
  static absl::StatusOr<std::unique_ptr<HookSession>> Create(HookSettings settings,
                                                             std::unique_ptr<Collective> collective);
  // A session of a centralized or hybrid scheme: joins the settings'
  // coordinator with the job run over `layer_sizes` (the model's parameters
  // in backward order; HookJobRun) and builds the job's scheme, whose groups
  // are the job's (not the caller's). The coordinator's refusals (a run that
  // differs from the job's, a bad token) and an unreachable coordinator
  // (after join_timeout_s) are the errors; FAILED_PRECONDITION when the rank
  // the coordinator gives differs from the collective's.
  static absl::StatusOr<std::unique_ptr<HookSession>> Join(HookSettings settings,
                                                           const std::vector<uint64_t>& layer_sizes,
                                                           std::unique_ptr<Collective> collective);
  bool joined() const { return job_scheme_ != nullptr; }

  // A new group of `dim` (>= 1) elements; its index. Not in a joined
  // session (FAILED_PRECONDITION: its groups are the job's).
  absl::StatusOr<int> AddGroup(uint64_t dim);
  int num_groups() const;
  uint64_t group_dim(int group) const;

  // A joined session's step: every group of the job exchanged (all in flight
  // at once), reconciled (the hybrid redoes failed groups on the collective),
  // checked and settled; `grad` and `out` hold the whole model (the layers of
  // Join, concatenated). Errors as Exchange's.
  absl::Status ExchangeStep(uint64_t step, absl::Span<const float> grad, absl::Span<float> out);

  // See the contract above. grad and out: the group's dim floats; params:
  // its parameter values (the schemes that weigh by them) or empty.
  // FAILED_PRECONDITION for a non-finite gradient or update (nothing
  // settled), INVALID_ARGUMENT for a bad group or size, the scheme's error
  // otherwise.
  absl::Status Exchange(int group, uint64_t step, absl::Span<const float> grad, absl::Span<const float> params,
                        absl::Span<float> out);

  // The same for a session of device=cuda: grad and out hold the group's
  // dim floats in device memory of the session's GPU (grad written by work
  // the caller has completed); out holds the mean update when it returns.
  // The gradient stays on the GPU through error feedback, selection, sketch
  // and decode; the sketch crosses to the host for the collective.
  // FAILED_PRECONDITION in a session on the host (and Exchange in one on a
  // GPU).
  absl::Status ExchangeOnDevice(int group, uint64_t step, const float* grad, float* out, uint64_t dim);

  // After the last Exchange of `step` (every rank calls it): with
  // check_finite, FAILED_PRECONDITION on every rank when any rank's gradient
  // of the step was not finite (one allreduce of world_size flags per step;
  // such a gradient was exchanged as zeros). OK at once in a joined session,
  // whose ExchangeStep checks first.
  absl::Status FinishStep(uint64_t step);

  // The group's state (AggregationScheme::SaveState: residual, velocity,
  // the method's state), and its restoration (INVALID_ARGUMENT, nothing
  // restored, if it does not fit).
  absl::StatusOr<GroupState> SaveState(int group) const;
  absl::Status RestoreState(int group, const GroupState& state);

  const HookStats& stats() const { return stats_; }
  // The counters as JSON, with "peel_recovered_share" (the share of the
  // energy this rank inserted into peeled sketches that the decodes gave
  // back; null without peeled sketches) and "warnings" (the groups'
  // compressors that do not fit the world size, worker/pipeline/job_plan.h
  // JobFitWarnings, and a peel that recovered under 90%).
  std::string StatsJson() const;

 private:
  struct Group {
    uint64_t dim = 0;
    std::unique_ptr<CollectiveScheme> scheme;
  };
  HookSession(HookSettings settings, std::unique_ptr<Collective> collective)
      : settings_(std::move(settings)), collective_(std::move(collective)) {}
  absl::Status CheckGroup(int group) const;
  // Makes the session's GPU the calling thread's (device=cuda; OK on the host).
  absl::Status UseSessionGpu() const;
  // Records this rank's first non-finite gradient of `step` (exchanged as zeros).
  void NoteNonFinite(int group, uint64_t step, size_t index);
  // Runs the group's scheme on `grad` for `step`.
  absl::StatusOr<ExchangeResult> RunExchange(int group, uint64_t step, GradientView grad,
                                             absl::Span<const float> params);
  // FAILED_PRECONDITION ("diverged: ...") for a non-finite value of the update.
  absl::Status CheckUpdateFinite(int group, uint64_t step, const Update& update) const;
  // What a summed update is multiplied by to give the mean: 1 / world_size.
  float MeanScale() const { return sketchfuse::MeanScale(settings_.world_size); }
  // Settles the exchanged group as applied and counts it.
  absl::Status Applied(int group, uint64_t step, const ExchangeResult& result);
  // One allreduce of world_size flags: FAILED_PRECONDITION on every rank,
  // naming the step and the ranks, if any rank has a non-finite gradient
  // (`local`: this rank's, described).
  absl::Status CheckAllFinite(uint64_t step, const std::optional<std::string>& local);
  void Count(uint64_t step, const ExchangeResult& result);

  const HookSettings settings_;
  std::unique_ptr<Collective> collective_;
  std::vector<Group> groups_;
  // A joined session: its coordinator (heartbeats), the job's scheme and
  // where each group starts in the model's gradient.
  std::unique_ptr<CoordinatorClient> coordinator_;
  std::unique_ptr<AggregationScheme> job_scheme_;
  std::vector<uint64_t> group_offset_, group_dim_;
  HookStats stats_;
  // JobFitWarnings of the session's groups, as they were added or joined.
  std::vector<std::string> fit_warnings_;
  std::optional<std::string> nonfinite_;  // this rank's first non-finite gradient of nonfinite_step_
  uint64_t nonfinite_step_ = 0;
  bool any_step_ = false;
  uint64_t last_step_ = 0;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_HOOK_HOOK_SESSION_H_
