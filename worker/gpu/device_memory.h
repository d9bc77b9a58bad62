// Device memory for a GPU worker, declared so that code built without the
// CUDA toolkit compiles against it: there, every function returns
// FAILED_PRECONDITION saying the build has no CUDA (device_unavailable.cc).
//
//   CheckGpuWorker()           whether this process can keep gradients on a GPU
//   DeviceArray                an owning float array in device memory
//   MakeDeviceFusionBuffers    the step pipeline's fusion buffers on the device
//
// Device memory is plain cudaMalloc memory of device 0 (never managed memory).
#ifndef SKETCHFUSE_WORKER_GPU_DEVICE_MEMORY_H_
#define SKETCHFUSE_WORKER_GPU_DEVICE_MEMORY_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/pipeline/fusion_buffers.h"
#include "worker/core/gradient_view.h"

namespace sketchfuse {

// OK when this build has CUDA and a GPU is visible; FAILED_PRECONDITION
// naming what is missing otherwise.
absl::Status CheckGpuWorker();

class DeviceArray {
 public:
  DeviceArray() = default;
  ~DeviceArray();
  DeviceArray(DeviceArray&& other) noexcept;
  DeviceArray& operator=(DeviceArray&& other) noexcept;
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  // A device copy of `host` (complete on return).
  static absl::StatusOr<DeviceArray> Upload(absl::Span<const float> host);

  // The whole array, or `size` elements from `offset` (which must fit).
  GradientView view() const { return GradientView::OnDevice(data_, size_); }
  GradientView view(size_t offset, size_t size) const { return GradientView::OnDevice(data_ + offset, size); }
  size_t size() const { return size_; }
  // The device memory, for writers (kernels, front ends' outputs).
  float* data() { return data_; }

 private:
  float* data_ = nullptr;
  size_t size_ = 0;
};

// Copies any view (host or device memory) to the host (complete on return).
absl::StatusOr<std::vector<float>> CopyToHost(GradientView values);

// One device buffer per group size, written on one CUDA stream. Writes
// accept host values (copied when Write returns) and device values (enqueued;
// Seal waits for them, so a group handed to the communication thread is
// whole); Get returns device views.
absl::StatusOr<std::unique_ptr<FusionBuffers>> MakeDeviceFusionBuffers(const std::vector<int64_t>& group_sizes);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_GPU_DEVICE_MEMORY_H_
