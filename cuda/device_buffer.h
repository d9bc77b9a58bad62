// DeviceBuffer<T>: an owning, move-only array in GPU memory (cudaMalloc; never
// managed memory), with checked copies to and from the host.
#ifndef SKETCHFUSE_CUDA_DEVICE_BUFFER_H_
#define SKETCHFUSE_CUDA_DEVICE_BUFFER_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "cuda/cuda_check.h"

namespace sketchfuse {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { Reset(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      Reset();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // `size` elements of uninitialized device memory.
  static absl::StatusOr<DeviceBuffer> Allocate(size_t size) {
    DeviceBuffer buffer;
    if (size > 0) {
      GPU_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&buffer.data_), size * sizeof(T)),
                           "allocating a device buffer");
    }
    buffer.size_ = size;
    return buffer;
  }

  // A device copy of `host`.
  static absl::StatusOr<DeviceBuffer> FromHost(absl::Span<const T> host) {
    absl::StatusOr<DeviceBuffer> buffer = Allocate(host.size());
    if (!buffer.ok()) return buffer.status();
    if (!host.empty()) {
      GPU_RETURN_IF_ERROR(cudaMemcpy(buffer->data_, host.data(), host.size() * sizeof(T),
                                      cudaMemcpyHostToDevice),
                           "copying to the device");
    }
    return buffer;
  }

  // Copies the whole buffer back to the host (synchronous).
  absl::StatusOr<std::vector<T>> ToHost() const {
    std::vector<T> host(size_);
    if (size_ > 0) {
      GPU_RETURN_IF_ERROR(
          cudaMemcpy(host.data(), data_, size_ * sizeof(T), cudaMemcpyDeviceToHost),
          "copying to the host");
    }
    return host;
  }

  // Sets every byte to zero on `stream`.
  absl::Status ZeroAsync(cudaStream_t stream) {
    if (size_ == 0) return absl::OkStatus();
    GPU_RETURN_IF_ERROR(cudaMemsetAsync(data_, 0, size_ * sizeof(T), stream),
                         "zeroing a device buffer");
    return absl::OkStatus();
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void Reset() {
    if (data_ != nullptr) cudaFree(data_);
    data_ = nullptr;
    size_ = 0;
  }

  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_CUDA_DEVICE_BUFFER_H_
