// device_memory.h in a build without the CUDA toolkit: nothing can be placed
// on a GPU, and every entry point says so.
#include <utility>

#include "worker/gpu/device_memory.h"

namespace sketchfuse {
namespace {

absl::Status NoCuda() {
  return absl::FailedPreconditionError(
      "device=gpu needs a GPU; there is none (built without the CUDA toolkit)");
}

}  // namespace

absl::Status CheckGpuWorker() { return NoCuda(); }

DeviceArray::~DeviceArray() = default;
DeviceArray::DeviceArray(DeviceArray&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
DeviceArray& DeviceArray::operator=(DeviceArray&& other) noexcept {
  data_ = std::exchange(other.data_, nullptr);
  size_ = std::exchange(other.size_, 0);
  return *this;
}
absl::StatusOr<DeviceArray> DeviceArray::Upload(absl::Span<const float>) { return NoCuda(); }

absl::StatusOr<std::vector<float>> CopyToHost(GradientView values) {
  if (values.on_device()) return NoCuda();
  return std::vector<float>(values.host().begin(), values.host().end());
}

absl::StatusOr<std::unique_ptr<FusionBuffers>> MakeDeviceFusionBuffers(const std::vector<int64_t>&) {
  return NoCuda();
}

}  // namespace sketchfuse
