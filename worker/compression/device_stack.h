// The compression state of one fusion group kept in device memory: what
// GroupCompressors delegates to when the run places its groups on the GPU.
// worker/gpu/device_group_state.h implements it on the kernels of cuda/;
// the scheme layer (worker/schemes/scheme_registry.h CompressorsFor) hands
// its factory to GroupCompressors::Create, so compression never depends on
// the GPU code.
#ifndef SKETCHFUSE_WORKER_COMPRESSION_DEVICE_STACK_H_
#define SKETCHFUSE_WORKER_COMPRESSION_DEVICE_STACK_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/compressor.h"
#include "common/error_feedback.h"
#include "common/payload.h"
#include "worker/core/gradient_view.h"

namespace sketchfuse {

class DeviceStack {
 public:
  virtual ~DeviceStack() = default;
  virtual uint64_t dim() const = 0;
  // Accumulates `grad` (device memory, dim elements) and returns the sketch
  // of the residual for training step `step` (method=peel: of its largest
  // entries, listed in the payload's `inserted`, hashed with the step's
  // seed; method=candidates: of the whole residual, hashed with the step's
  // seed where its layout says so). INVALID_ARGUMENT for a host view or
  // another size.
  virtual absl::StatusOr<Payload> Encode(GradientView grad, uint64_t step) = 0;
  // The coordinates of `aggregate`, a sketch of this group's shape and dim,
  // as the group's compressor decodes them (heavy hitters, the peel, or the
  // candidates with their estimates).
  virtual absl::StatusOr<Update> Decode(const Payload& aggregate) = 0;
  // What a release cap weighs after an Encode that listed its inserted
  // coordinates: the sum of squares of the residual there (added in index
  // order, as the host stack does) and of the whole velocity (0 without
  // momentum).
  struct ReleaseNorms {
    double sent_squared = 0;
    double velocity_squared = 0;
  };
  virtual absl::StatusOr<ReleaseNorms> LastReleaseNorms() const = 0;
  // The residual's values at `indices` (each < dim), in their order: a
  // second round's exact values, gathered on the device and copied back.
  // INVALID_ARGUMENT for an index out of range (nothing is read).
  virtual absl::StatusOr<std::vector<float>> ResidualAt(absl::Span<const uint32_t> indices) const = 0;
  // The velocity's sum of squares (0 without momentum): what a release cap
  // of exact values weighs them against.
  virtual absl::StatusOr<double> VelocitySquared() const = 0;
  // Sets the residual at `release` to residual_kept times its value (0:
  // zeroes it; a capped release keeps the unsent fraction) and zeroes the
  // velocity at `velocity_mask`. INVALID_ARGUMENT (state unchanged) if either
  // does not fit the group.
  virtual absl::Status Settle(const Coordinates& release, const Coordinates& velocity_mask, float residual_kept) = 0;
  // The residual times `factor` (one rounded product per element, as
  // ErrorFeedback::ScaleResidual): the run keeps it in units of the current
  // learning rate and the rate changed.
  virtual absl::Status ScaleResidual(float factor) = 0;
  // Host copies of the residual and the velocity (empty without momentum),
  // and their restoration (an empty vector restores zeros).
  virtual absl::StatusOr<std::vector<float>> Residual() const = 0;
  virtual absl::StatusOr<std::vector<float>> Velocity() const = 0;
  virtual absl::Status Restore(absl::Span<const float> residual, absl::Span<const float> velocity) = 0;
};

// Builds a group's device state from its sketch layout, its size and the
// momentum of momentum correction (negative: none).
using DeviceStackFactory = std::function<absl::StatusOr<std::unique_ptr<DeviceStack>>(
    const Compressor::SketchLayout& layout, uint64_t dim, float momentum)>;

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_COMPRESSION_DEVICE_STACK_H_
