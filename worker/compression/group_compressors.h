// A worker's per-group compression state, shared by every scheme: for each
// fusion group of the job, its compressor (the job's spec for the group)
// under error feedback and momentum correction when the scheme layer asks
// for them (StackOptions). Encode accumulates the group's gradient into the
// residual and encodes it; Settle, once the step's update is applied,
// releases from the residual what the update carried and gives back what a
// decentralized scheme received and dropped. So, for every scheme, whatever
// was not applied stays in some worker's residual.
//
// Placement: given a DeviceStackFactory, every group's state lives on the GPU
// (worker/compression/device_stack.h): gradients arrive in device memory,
// encode and decode run there, and only sketches cross to the host. The
// scheme layer allows that for the count_sketch schemes without exact second
// rounds (CheckDevicePlacement); the host stack serves every scheme.
//
// NOTE: not thread-safe; a group is used by one thread at a time.
#ifndef SKETCHFUSE_WORKER_COMPRESSION_GROUP_COMPRESSORS_H_
#define SKETCHFUSE_WORKER_COMPRESSION_GROUP_COMPRESSORS_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/adam_moments.h"
#include "common/compressor.h"
#include "common/error_feedback.h"
#include "common/round_finish.h"
#include "proto/job_config.pb.h"
#include "worker/compression/device_stack.h"
#include "worker/compression/group_state.h"
#include "worker/compression/settlement.h"
#include "worker/core/gradient_view.h"

namespace sketchfuse {

// How every group's compressor is decorated: the scheme layer derives it
// from the run and the scheme's traits (worker/schemes/scheme_registry.h
// StackOptionsOf), so this library knows no scheme.
struct StackOptions {
  // Error feedback: the residual keeps what was not sent.
  bool error_feedback = true;
  // Momentum correction on the worker, before compression, with
  // momentum-factor masking (DGC): the momentum in [0, 1), or negative for
  // none (the optimizer keeps it, or the run has none).
  float worker_momentum = -1;
  // Adam's moments on the worker, before compression (common/adam_moments.h):
  // each group encodes Adam's direction of this worker's gradients, under
  // error feedback; unset: none (Adam, if any, is the optimizer's). Not with
  // worker_momentum, nor on the GPU.
  std::optional<AdamHyperparameters> worker_adam;
  // The release cap (> 0: a payload releases at most release_cap times the
  // norm of the group's velocity; the rest stays in the residual), 0: none.
  float release_cap = 0;
  // Set: every group's state lives on the GPU, built by this factory
  // (worker/gpu/device_group_state.h); unset: on the host.
  DeviceStackFactory device;
};

// OK for a factor that residuals may be multiplied by (finite and > 0);
// INVALID_ARGUMENT naming the factor otherwise. The one check of
// GroupCompressors::ScaleResiduals, AggregationScheme::ScaleResiduals and
// StepPipeline::Applied.
absl::Status ValidateResidualRescale(float factor);

class GroupCompressors {
 public:
  // One stack per group of `job` (job.groups[g].compressor, decorated as
  // `options` say), on the host, or on the GPU when options.device is set.
  // A group whose method keeps state where the sum is
  // (Compressor::keeps_aggregation_state) gets neither error feedback nor
  // momentum: that state keeps them. INVALID_ARGUMENT naming the group for a bad spec or a group
  // that cannot live on the GPU; FAILED_PRECONDITION for a GPU state without
  // a GPU.
  static absl::StatusOr<GroupCompressors> Create(const v1::JobConfig& job, StackOptions options);

  GroupCompressors(GroupCompressors&&) = default;
  GroupCompressors& operator=(GroupCompressors&&) = default;

  int size() const { return static_cast<int>(stacks_.size()); }
  // OK if 0 <= group < size(); INVALID_ARGUMENT otherwise.
  absl::Status CheckGroup(int group) const;

  bool on_device() const { return on_device_; }

  // Accumulates `grad` and encodes the group (Compressor::Encode). When the
  // stacks cap releases (StackOptions::release_cap) and the payload would carry more than
  // release_cap * ||velocity|| (L2), its values are scaled down to that (a
  // sparse payload's values; a sketch of a selection is linear in them), and
  // Settle keeps the unsent part of each released coordinate.
  // FAILED_PRECONDITION for a gradient in the other placement's memory; the
  // divergence of `context.step` (worker/core/divergence.h, DATA_LOSS, "payload")
  // for a payload holding a NaN or an infinity (a residual that overflowed).
  absl::StatusOr<Payload> Encode(int group, GradientView grad, const EncodeContext& context);
  // The release cap of a second round that sends this worker's exact values
  // at some candidates (`values`, read from EncodedInput) and releases them
  // at the at most `released` candidates the round applies: when the stacks
  // cap releases and the `released` largest values in magnitude hold more
  // than release_cap * ||velocity|| (L2), every value is scaled down by the
  // same factor, so no choice of `released` candidates releases more than
  // the cap; Settle then keeps the unsent part of each released coordinate,
  // as after a capped Encode. A later call for the same step (a fallback
  // redoing the round) replaces the factor. For a group on the GPU the
  // velocity's norm is summed there.
  absl::Status CapExactValues(int group, absl::Span<float> values, uint64_t released);
  // This worker's exact values at `candidates` (each < the group's dim), in
  // their order: EncodedInput there on the host (`grad` is read only when
  // the stack keeps neither residual nor velocity), the residual gathered on
  // the device for a group on the GPU. What a second round sends before
  // CapExactValues. INVALID_ARGUMENT for a bad group or a candidate out of
  // range; a device copy's error.
  absl::StatusOr<std::vector<float>> ExactValuesAt(int group, GradientView grad,
                                                   absl::Span<const uint32_t> candidates) const;
  // Decodes an aggregate with the group's compressor (on the GPU when the
  // groups are there), taking it over (a dense sum becomes the update
  // without a copy: Compressor::DecodeOwned).
  absl::StatusOr<Update> Decode(int group, Payload aggregate);
  const Compressor& compressor(int group) const { return *stacks_[group].top; }
  // The group's low-rank rounds (Compressor::low_rank: PowerSGD's warm start
  // and this step's factors), or null for another method.
  LowRankRounds* low_rank(int group) { return stacks_[group].top->low_rank(); }
  // The check of the group's factor values (Compressor::CheckFactorRound).
  FactorRoundCheck factor_check(int group) const;

  // The group's residual after the last Encode (the values Encode saw); empty
  // without error feedback, and for groups on the GPU (see SaveState).
  absl::Span<const float> residual(int group) const;
  bool has_error_feedback() const;
  // The vector the group's inner compressor encoded last: the residual under
  // error feedback, else the velocity under momentum, else Adam's direction
  // under worker Adam, else `grad` itself.
  // Host placement only: empty for groups on the GPU (ExactValuesAt reads
  // either placement at given coordinates).
  absl::Span<const float> EncodedInput(int group, GradientView grad) const;

  // Applies a step's settlement. INVALID_ARGUMENT (state unchanged) if a
  // part does not fit the group.
  absl::Status Settle(int group, const Settlement& settlement);

  // Multiplies every group's residual by `factor` (the velocity is left
  // alone), between steps: the run keeps its residuals in units of the
  // current learning rate, and the rate changes from r to r' (factor r / r':
  // ErrorFeedback::ScaleResidual). Nothing to do without error feedback.
  // INVALID_ARGUMENT (nothing scaled) for a factor that is not finite and
  // > 0; a device's error (groups before it are scaled: the run then stops).
  absl::Status ScaleResiduals(float factor);

  // What the decodes gave back of what this worker inserted into its peeled
  // sketches (payloads listing their inserted coordinates), summed over the
  // groups and the settled steps since Create: the energy (sum of squares)
  // of the residual at the inserted coordinates, and at those a settlement
  // released. On the GPU the residual at the inserted coordinates is
  // gathered on the device (DeviceStack::ResidualAt) at each settlement.
  // Zero for every other payload.
  struct PeelRecovery {
    double inserted = 0;
    double recovered = 0;
    int64_t settlements = 0;  // group-steps counted
    // recovered / inserted, or 1 when nothing was inserted.
    double share() const { return inserted > 0 ? recovered / inserted : 1.0; }
  };
  const PeelRecovery& peel_recovery() const { return peel_recovery_; }

  // Every group's residual, velocity and Adam moments (empty when the run
  // keeps none), a low-rank group's warm start as its method_state
  // (otherwise method_state is the scheme's), and their restoration:
  // INVALID_ARGUMENT, with nothing restored, if the state does not fit the
  // groups or holds a part this run does not keep (method_state is looked at
  // for low-rank groups only).
  std::vector<GroupState> SaveState() const;
  absl::Status RestoreState(const std::vector<GroupState>& state);

 private:
  struct Stack {
    std::unique_ptr<Compressor> top;
    uint64_t dim = 0;  // the group's elements
    ErrorFeedback* error_feedback = nullptr;  // inside top, or null
    Momentum* momentum = nullptr;             // inside top, or null
    AdamMoments* adam = nullptr;              // inside top, or null
    // On the GPU: the state, and `top` is the bare compressor (for its spec
    // and payload checks).
    std::unique_ptr<DeviceStack> device;
    // StackOptions::release_cap.
    float release_cap = 0;
    // The factor the last payload's values were scaled by (1: sent whole).
    float sent_fraction = 1;
    // The coordinates the last payload inserted into a peeled sketch (either
    // placement), until the step is settled.
    std::vector<uint32_t> inserted;
  };
  GroupCompressors(std::vector<Stack> stacks, bool on_device) : stacks_(std::move(stacks)), on_device_(on_device) {}
  // Scales `payload` down to the stack's release cap, if it is above it (a
  // GPU stack's norms can fail to read back).
  static absl::Status CapRelease(Stack& stack, Payload* payload);
  // The squared L2 norm of a host stack's velocity.
  static double VelocitySquared(const Stack& stack);
  // Scales `values` so that what they release (sent_squared) is at most
  // release_cap times the velocity's norm, and records the factor in
  // stack.sent_fraction (untouched when under the cap).
  static void ScaleToCap(Stack& stack, double sent_squared, double velocity_squared, absl::Span<float> values);

  // Adds the last payload's recovery (stack.inserted, whose residual values
  // are `at_inserted` in their order, against `release`) to peel_recovery_
  // and clears stack.inserted; before the residual is released.
  void CountRecovery(Stack& stack, absl::Span<const float> at_inserted, const Coordinates& release);

  std::vector<Stack> stacks_;
  bool on_device_ = false;
  PeelRecovery peel_recovery_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_COMPRESSION_GROUP_COMPRESSORS_H_
