// device_group_state.h in a build without the CUDA toolkit: nothing can be
// placed on a GPU, and every entry point says so.
#include <utility>

#include "worker/gpu/device_group_state.h"
#include "worker/gpu/device_memory.h"

namespace sketchfuse {
namespace {

// The refusal of worker/gpu/device_memory_unavailable.cc.
absl::Status NoCuda() { return CheckGpuWorker(); }

}  // namespace

struct DeviceGroupState::Impl {};
DeviceGroupState::DeviceGroupState(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DeviceGroupState::~DeviceGroupState() = default;
uint64_t DeviceGroupState::dim() const { return 0; }
absl::StatusOr<std::unique_ptr<DeviceGroupState>> DeviceGroupState::Create(const Compressor::SketchLayout&, uint64_t,
                                                                           float) {
  return NoCuda();
}
absl::StatusOr<Payload> DeviceGroupState::Encode(GradientView, uint64_t) { return NoCuda(); }
absl::StatusOr<Update> DeviceGroupState::Decode(const Payload&) { return NoCuda(); }
absl::StatusOr<DeviceStack::ReleaseNorms> DeviceGroupState::LastReleaseNorms() const { return NoCuda(); }
absl::StatusOr<std::vector<float>> DeviceGroupState::ResidualAt(absl::Span<const uint32_t>) const { return NoCuda(); }
absl::StatusOr<double> DeviceGroupState::VelocitySquared() const { return NoCuda(); }
absl::Status DeviceGroupState::Settle(const Coordinates&, const Coordinates&, float) { return NoCuda(); }
absl::StatusOr<std::vector<float>> DeviceGroupState::Residual() const { return NoCuda(); }
absl::StatusOr<std::vector<float>> DeviceGroupState::Velocity() const { return NoCuda(); }
absl::Status DeviceGroupState::Restore(absl::Span<const float>, absl::Span<const float>) { return NoCuda(); }

}  // namespace sketchfuse
