// The compression state of one fusion group on a GPU worker: the job's
// count_sketch compressor (method=peel, estimate or candidates) under error
// feedback, and momentum correction when the run uses it, with the residual,
// the velocity and the sketch in device memory: the DeviceStack
// (worker/compression/device_stack.h) of a GPU worker. It does on the device
// what the CPU stack of worker/compression/group_compressors.h does on the
// host:
//
//   Encode(g):   u = m * u + g; e = e + u (e = e + g without momentum);
//                peel: the payload is the Count-Sketch, under the step's
//                seed, of e's k largest entries (selected on the device: the
//                CPU's selection, cuda/topk_kernels.h), listed in `inserted`;
//                estimate: the Count-Sketch of the whole of e; candidates
//                (the fixed-size sketch): the same, under the step's seed
//                where the spec hashes per step, the table rounded to
//                bfloat16 where it says table=bf16. Buckets and signs are the
//                CPU's bit for bit (common/sketch_hash.h); a cell's sum may
//                differ from the CPU's in float rounding (atomics add in
//                another order).
//   Decode(s):   peel: the peeling decode of cuda/peel_kernels.h; estimate:
//                the heavy hitters of the estimates; candidates: the
//                candidates (candidates times k heavy hitters, with their
//                estimates). Either way, for the same table, the CPU's
//                indices and values bit for bit.
//   ResidualAt:  a second round's exact values: e gathered at the
//                candidates (cuda/sparse_kernels.h) and copied back.
//   Settle:      zeroes e (or, after a capped release, keeps its unsent
//                fraction) and u at the applied coordinates.
//   ScaleResidual: e = f * e when the learning rate changes (the run keeps
//                the residual in units of the current rate).
//
// Only the sketch (and a second round's values at the candidates) crosses to
// the host; the gradient, residual and velocity never do, except in
// Save/Restore for checkpoints.
//
// NOTE: not thread-safe; a group is used by one thread at a time. Each state
// has its own CUDA stream, so groups may be encoded concurrently.
#ifndef SKETCHFUSE_WORKER_GPU_DEVICE_GROUP_STATE_H_
#define SKETCHFUSE_WORKER_GPU_DEVICE_GROUP_STATE_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/compressor.h"
#include "common/error_feedback.h"
#include "common/payload.h"
#include "worker/compression/device_stack.h"
#include "worker/core/gradient_view.h"

namespace sketchfuse {

class DeviceGroupState final : public DeviceStack {
 public:
  // The state of a group of `dim` elements encoded with `layout` (from the
  // compressor's SketchLayoutFor(dim)); `momentum` in [0, 1), or negative for
  // none. FAILED_PRECONDITION without a GPU (worker/gpu/device_memory.h
  // CheckGpuWorker), INVALID_ARGUMENT for a bad size or momentum,
  // RESOURCE_EXHAUSTED when device memory runs out.
  static absl::StatusOr<std::unique_ptr<DeviceGroupState>> Create(const Compressor::SketchLayout& layout,
                                                                  uint64_t dim, float momentum);
  ~DeviceGroupState() override;

  uint64_t dim() const override;

  // Accumulates `grad` (device memory, dim elements) and returns the sketch
  // of the residual for `step`. INVALID_ARGUMENT for a host view or another
  // size.
  absl::StatusOr<Payload> Encode(GradientView grad, uint64_t step) override;

  // The coordinates of `aggregate`, a sketch of this group's rows, columns
  // (and, for estimate, seed) and dim (INVALID_ARGUMENT otherwise).
  absl::StatusOr<Update> Decode(const Payload& aggregate) override;

  // After a peel Encode: the residual's sum of squares at the inserted
  // coordinates and the velocity's (FAILED_PRECONDITION after an estimate
  // Encode, or before any).
  absl::StatusOr<ReleaseNorms> LastReleaseNorms() const override;

  // The residual at `indices`, in their order (INVALID_ARGUMENT, nothing
  // read, for an index out of range).
  absl::StatusOr<std::vector<float>> ResidualAt(absl::Span<const uint32_t> indices) const override;

  // The velocity's sum of squares, summed on the device (0 without
  // momentum).
  absl::StatusOr<double> VelocitySquared() const override;

  // Sets the residual at `release` to residual_kept times its value and
  // zeroes the velocity at `velocity_mask`. INVALID_ARGUMENT (state
  // unchanged) if either does not fit the group.
  absl::Status Settle(const Coordinates& release, const Coordinates& velocity_mask, float residual_kept) override;

  // e *= factor on the device (cuda/error_feedback_kernels.h LaunchScale).
  absl::Status ScaleResidual(float factor) override;

  // Host copies of the residual and the velocity (empty without momentum),
  // and their restoration (INVALID_ARGUMENT unless sizes fit; an empty
  // vector restores zeros).
  absl::StatusOr<std::vector<float>> Residual() const override;
  absl::StatusOr<std::vector<float>> Velocity() const override;
  absl::Status Restore(absl::Span<const float> residual, absl::Span<const float> velocity) override;

 private:
  struct Impl;
  explicit DeviceGroupState(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_GPU_DEVICE_GROUP_STATE_H_
