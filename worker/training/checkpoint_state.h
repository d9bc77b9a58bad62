// The groups' state in a worker's checkpoint (worker/training/trainer.cc):
// how it is written and read, by name.
//
// Format 2 (written): "state_format" = 2, "groups" = G, and for each group g
// the tensors "group_<g>_residual", "group_<g>_velocity" and
// "group_<g>_method_state", "group_<g>_first_moment" and
// "group_<g>_second_moment" (worker/compression/group_state.h; an empty
// tensor for a part the run does not keep), and "group_<g>_moment_steps"
// (one int64; read as 0 with no moments where a checkpoint written before
// them lacks the three).
// Format 1 (read, written before): no "state_format"; "groups" = 2G entries
// "residual_<i>", entry 2g the residual and 2g + 1 the velocity of group g,
// or, for a group whose method keeps state (FetchSGD on every worker), its
// error and its momentum sketch.
#ifndef SKETCHFUSE_WORKER_TRAINING_CHECKPOINT_STATE_H_
#define SKETCHFUSE_WORKER_TRAINING_CHECKPOINT_STATE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "torch/torch.h"
#include "worker/compression/group_state.h"

namespace sketchfuse {

inline constexpr int64_t kCheckpointStateFormat = 2;

// Writes `state` in format 2. Throws c10::Error as the archive does.
void WriteGroupStates(const std::vector<GroupState>& state, torch::serialize::OutputArchive& archive);

// Reads the groups' state of either format. `current` is the run's own
// state now (its size is the number of groups; a group with a method state
// tells how format 1 stored it). INVALID_ARGUMENT naming the misfit for an
// unknown format or another number of groups (checked before anything is
// allocated for the parts); the archive's c10::Error for a missing tensor.
// The caller restores the result (AggregationScheme::RestoreState checks
// each part's size).
absl::StatusOr<std::vector<GroupState>> ReadGroupStates(torch::serialize::InputArchive& archive,
                                                        const std::vector<GroupState>& current);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_TRAINING_CHECKPOINT_STATE_H_
