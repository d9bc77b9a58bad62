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
//    what it is given). With check_finite, every rank learns at once whether
//    any rank's gradient is non-finite (one allreduce of world_size floats
//    per exchange) and all of them fail the exchange with the same error
//    naming the step, the group and the ranks: no rank is left waiting in a
//    collective the others skipped.
#ifndef SKETCHFUSE_WORKER_HOOK_HOOK_SESSION_H_
#define SKETCHFUSE_WORKER_HOOK_HOOK_SESSION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/job_config.pb.h"
#include "worker/collective/collective.h"
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
  bool error_feedback = true;
  double release_cap = 1.0;
  bool second_round = false;
  bool check_finite = true;
};

// Parses "key=value" lines (keys: scheme, compressor, rank, world_size, seed,
// momentum, error_feedback, release_cap, second_round, check_finite; scheme
// and world_size required) and checks them as a worker's flags are checked:
// INVALID_ARGUMENT naming the key for an unknown key, a malformed value, an
// unknown scheme or one the hook does not run, or a compressor that does not
// fit the scheme.
absl::StatusOr<HookSettings> ParseHookSettings(const std::string& text);
// The settings as "key=value" lines in a fixed order (what ranks compare).
std::string HookSettingsText(const HookSettings& settings);
// The run a group of `dim` elements is aggregated under.
v1::RunConfig HookRun(const HookSettings& settings);

struct HookStats {
  uint64_t steps = 0;  // distinct step numbers exchanged
  uint64_t exchanges = 0;
  uint64_t bytes_sent = 0;
  uint64_t dense_bytes = 0;
  double compress_s = 0, communicate_s = 0, decode_s = 0, check_s = 0;
};

class HookSession {
 public:
  // INVALID_ARGUMENT when the collective's size or rank differ from the
  // settings'. The collective is owned.
  static absl::StatusOr<std::unique_ptr<HookSession>> Create(HookSettings settings,
                                                             std::unique_ptr<Collective> collective);

  // A new group of `dim` (>= 1) elements; its index.
  absl::StatusOr<int> AddGroup(uint64_t dim);
  int num_groups() const { return static_cast<int>(groups_.size()); }
  uint64_t group_dim(int group) const { return groups_[group].dim; }

  // See the contract above. grad and out: the group's dim floats; params:
  // its parameter values (the schemes that weigh by them) or empty.
  // FAILED_PRECONDITION for a non-finite gradient or update (nothing
  // settled), INVALID_ARGUMENT for a bad group or size, the scheme's error
  // otherwise.
  absl::Status Exchange(int group, uint64_t step, absl::Span<const float> grad, absl::Span<const float> params,
                        absl::Span<float> out);

  // The group's two state entries (AggregationScheme::SaveState).
  absl::StatusOr<std::vector<std::vector<float>>> SaveState(int group) const;
  absl::Status RestoreState(int group, const std::vector<std::vector<float>>& state);

  const HookStats& stats() const { return stats_; }
  std::string StatsJson() const;

 private:
  struct Group {
    uint64_t dim = 0;
    std::unique_ptr<CollectiveScheme> scheme;
  };
  HookSession(HookSettings settings, std::unique_ptr<Collective> collective)
      : settings_(std::move(settings)), collective_(std::move(collective)) {}
  absl::Status CheckGroup(int group) const;
  absl::Status CheckAllFinite(int group, uint64_t step, absl::Span<const float> grad);

  const HookSettings settings_;
  std::unique_ptr<Collective> collective_;
  std::vector<Group> groups_;
  HookStats stats_;
  bool any_step_ = false;
  uint64_t last_step_ = 0;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_HOOK_HOOK_SESSION_H_
