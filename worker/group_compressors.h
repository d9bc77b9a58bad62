// A worker's per-group compression state, shared by every scheme: for each
// fusion group of the job, its compressor (the job's spec for the group)
// under error feedback (when the run keeps it) and momentum correction (when
// UsesMomentumCorrection). Encode accumulates the group's gradient into the
// residual and encodes it; Settle, once the step's update is applied,
// releases from the residual what the update carried and gives back what a
// decentralized scheme received and dropped. So, for every scheme, whatever
// was not applied stays in some worker's residual.
//
// Placement: with run.device "gpu" every group's state lives on the GPU
// (worker/gpu/device_group_state.h): gradients arrive in device memory,
// encode and decode run there, and only sketches cross to the host. That
// placement serves the count_sketch schemes without exact second rounds
// (CheckDevicePlacement); the host stack serves every scheme.
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
#include "worker/gpu/device_group_state.h"
#include "worker/gradient_view.h"
#include "worker/scheme_registry.h"

namespace sketchfuse {

// Where a run keeps momentum (run.momentum):
//   kOptimizer  the dense schemes leave it to the optimizer, exact there;
//   kWorker     compressed schemes keep it on the worker, before
//               compression, with momentum-factor masking (DGC's momentum
//               correction): the velocity is accumulated per group and
//               zeroed where an update was applied. Applying momentum after
//               aggregation instead amplifies the bursts in which error
//               feedback releases its residual, and costs accuracy;
//   kSketch     count_sketch method=fetchsgd keeps it in sketch space where
//               the sum is (common/fetchsgd_state.h), next to the error;
//   kNone       momentum 0.
enum class MomentumPlace { kNone, kOptimizer, kWorker, kSketch };
MomentumPlace MomentumPlaceOf(const v1::RunConfig& run);
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

// Whether the run caps what a worker releases per step (run.release_cap):
// schemes with momentum correction whose payload values are what a worker
// sends and is applied (topk_allgather, topk_ps, sketch_ps,
// sketch_allreduce, auto), without a second round (which sends the
// residual's exact values). SparDL and importance_allreduce send values
// from the residual itself; gtopk re-selects among the workers' values on
// its tree, which scaled values would bias (measured: 3 points lost on the
// MLP at its default density).
bool CapsRelease(const v1::RunConfig& run);

// Release and mask every coordinate of `update`: for a worker whose payload
// held all of them (a dense payload, a sketch of the whole group, a second
// round that summed every worker's exact values there).
Settlement SettleAt(const Update& update);

// Release and mask the coordinates of `update` that this worker's payload
// `sent` carried: a sparse payload's indices, a selective sketch's inserted
// coordinates (Payload::inserted), or every coordinate for a dense payload
// and a sketch of the whole group. A worker thus keeps in its residual what
// it never sent, even where another worker's value was applied (Top-k PS
// unions, peeled sketches), and what it sent but was not applied.
Settlement SettleSent(const Payload& sent, const Update& update);

// OK if the run may keep its groups on the GPU (run.device "gpu"): a
// count_sketch scheme (sketch_ps, sketch_allreduce, auto) with error feedback,
// no second round and method=estimate (the peeling decode is host code). INVALID_ARGUMENT naming the misfit otherwise (also
// for a device other than "", "cpu" and "gpu"); OK for a host-placed run.
// Says nothing about whether a GPU is present, nor about the workload (the
// worker daemon refuses the LibTorch models, which train on the CPU).
absl::Status CheckDevicePlacement(const v1::RunConfig& run);

class GroupCompressors {
 public:
  // One stack per group of `job` (job.groups[g].compressor, decorated as the
  // run asks), on the host or on the GPU as job.run().device says.
  // INVALID_ARGUMENT naming the group for a bad spec or a run that cannot be
  // placed on the GPU; FAILED_PRECONDITION for device "gpu" without a GPU.
  static absl::StatusOr<GroupCompressors> Create(const v1::JobConfig& job);

  GroupCompressors(GroupCompressors&&) = default;
  GroupCompressors& operator=(GroupCompressors&&) = default;

  int size() const { return static_cast<int>(stacks_.size()); }
  // OK if 0 <= group < size(); INVALID_ARGUMENT otherwise.
  absl::Status CheckGroup(int group) const;

  bool on_device() const { return on_device_; }

  // Accumulates `grad` and encodes the group (Compressor::Encode). When the
  // run caps releases (CapsRelease) and the payload would carry more than
  // release_cap * ||velocity|| (L2), its values are scaled down to that (a
  // sparse payload's values; a sketch of a selection is linear in them), and
  // Settle keeps the unsent part of each released coordinate.
  // FAILED_PRECONDITION for a gradient in the other placement's memory; the
  // divergence of `context.step` (worker/divergence.h, DATA_LOSS, "payload")
  // for a payload holding a NaN or an infinity (a residual that overflowed).
  absl::StatusOr<Payload> Encode(int group, GradientView grad, const EncodeContext& context);
  // Decodes an aggregate with the group's compressor (on the GPU when the
  // groups are there).
  absl::StatusOr<Update> Decode(int group, const Payload& aggregate);
  const Compressor& compressor(int group) const { return *stacks_[group].top; }

  // The group's residual after the last Encode (the values Encode saw); empty
  // without error feedback, and for groups on the GPU (see SaveState).
  absl::Span<const float> residual(int group) const;
  bool has_error_feedback() const;
  // The vector the group's inner compressor encoded last: the residual under
  // error feedback, else the velocity under momentum, else `grad` itself.
  // Host placement only: empty for groups on the GPU.
  absl::Span<const float> EncodedInput(int group, GradientView grad) const;

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
    // On the GPU: the state, and `top` is the bare compressor (for its spec
    // and payload checks).
    std::unique_ptr<DeviceGroupState> device;
    // run.release_cap when the run caps releases, else 0.
    float release_cap = 0;
    // The factor the last payload's values were scaled by (1: sent whole).
    float sent_fraction = 1;
  };
  GroupCompressors(std::vector<Stack> stacks, bool on_device) : stacks_(std::move(stacks)), on_device_(on_device) {}
  // Scales `payload` down to the stack's release cap, if it is above it.
  static void CapRelease(Stack& stack, Payload* payload);

  std::vector<Stack> stacks_;
  bool on_device_ = false;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_GROUP_COMPRESSORS_H_
