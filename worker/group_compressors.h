// A worker's per-group compression state, shared by every scheme: for each
// fusion group of the job, its compressor (the job's spec for the group)
// under error feedback (when the run keeps it) and momentum correction (when
// UsesMomentumCorrection). Encode accumulates the group's gradient into the
// residual and encodes it; Settle, once the step's update is applied,
// releases from the residual what the update carried and gives back what a
// decentralized scheme received and dropped. So, for every scheme, whatever
// was not applied stays in some worker's residual.
//
// NOTE: not thread-safe; a group is used by one thread at a time.
#ifndef SKETCHFUSE_WORKER_GROUP_COMPRESSORS_H_
#define SKETCHFUSE_WORKER_GROUP_COMPRESSORS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/compressor.h"
#include "common/error_feedback.h"
#include "proto/job_config.pb.h"

namespace sketchfuse {

// Where momentum lives. Compressed schemes keep it on the worker, before
// compression, with momentum-factor masking (DGC's momentum correction): the
// velocity is accumulated per group and zeroed where an update was applied.
// Applying momentum after aggregation instead amplifies the bursts in which
// error feedback releases its residual, and costs accuracy. The dense
// schemes leave momentum to the optimizer, which is exact there.
bool UsesMomentumCorrection(const v1::RunConfig& run);

// How one step changes a group's state once its update is applied.
struct Settlement {
  // Coordinates of this worker's residual that the update carried: zeroed.
  Coordinates release;
  // Values given back to the residual afterwards (dense or sparse; empty
  // sparse: none): received from peers and not forwarded.
  Update give_back;
  // Coordinates where the velocity is zeroed (momentum-factor masking).
  Coordinates velocity_mask;
};

// The usual settlement: release and mask the update's own coordinates.
Settlement SettleAt(const Update& update);

class GroupCompressors {
 public:
  // One stack per group of `job` (job.groups[g].compressor, decorated as the
  // run asks). INVALID_ARGUMENT naming the group for a bad spec.
  static absl::StatusOr<GroupCompressors> Create(const v1::JobConfig& job);

  GroupCompressors(GroupCompressors&&) = default;
  GroupCompressors& operator=(GroupCompressors&&) = default;

  int size() const { return static_cast<int>(stacks_.size()); }
  // OK if 0 <= group < size(); INVALID_ARGUMENT otherwise.
  absl::Status CheckGroup(int group) const;

  // Accumulates `grad` and encodes the group (Compressor::Encode).
  absl::StatusOr<Payload> Encode(int group, absl::Span<const float> grad, const EncodeContext& context);
  // Decodes an aggregate with the group's compressor.
  absl::StatusOr<Update> Decode(int group, const Payload& aggregate) const;
  const Compressor& compressor(int group) const { return *stacks_[group].top; }

  // The group's residual after the last Encode (the values Encode saw); empty
  // without error feedback.
  absl::Span<const float> residual(int group) const;
  bool has_error_feedback() const;
  // The vector the group's inner compressor encoded last: the residual under
  // error feedback, else the velocity under momentum, else `grad` itself.
  absl::Span<const float> EncodedInput(int group, absl::Span<const float> grad) const;

  // Applies a step's settlement. INVALID_ARGUMENT (state unchanged) if a
  // part does not fit the group.
  absl::Status Settle(int group, const Settlement& settlement);

  // Two entries per group, the residual then the velocity (empty when the
  // run keeps none), and their restoration (INVALID_ARGUMENT if the state
  // does not fit the groups).
  std::vector<std::vector<float>> SaveState() const;
  absl::Status RestoreState(const std::vector<std::vector<float>>& state);

 private:
  struct Stack {
    std::unique_ptr<Compressor> top;
    ErrorFeedback* error_feedback = nullptr;  // inside top, or null
    Momentum* momentum = nullptr;             // inside top, or null
  };
  explicit GroupCompressors(std::vector<Stack> stacks) : stacks_(std::move(stacks)) {}

  std::vector<Stack> stacks_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_GROUP_COMPRESSORS_H_
