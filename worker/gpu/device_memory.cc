// device_memory.h with the CUDA runtime (builds with the toolkit).
#include "worker/gpu/device_memory.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "cuda/cuda_check.h"
#include "cuda/device.h"

namespace sketchfuse {

absl::Status CheckGpuWorker() {
  const GpuAvailability gpus = ProbeGpus();
  if (gpus.device_count == 0) {
    return absl::FailedPreconditionError(absl::StrCat("device=gpu needs a GPU; there is none (", gpus.reason, ")"));
  }
  return absl::OkStatus();
}

DeviceArray::~DeviceArray() {
  if (data_ != nullptr) cudaFree(data_);
}

DeviceArray::DeviceArray(DeviceArray&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

DeviceArray& DeviceArray::operator=(DeviceArray&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

absl::StatusOr<DeviceArray> DeviceArray::Upload(absl::Span<const float> host) {
  if (absl::Status s = CheckGpuWorker(); !s.ok()) return s;
  DeviceArray array;
  if (!host.empty()) {
    GPU_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&array.data_), host.size() * sizeof(float)),
                        "allocating a device array");
    array.size_ = host.size();
    GPU_RETURN_IF_ERROR(cudaMemcpy(array.data_, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice),
                        "uploading a device array");
  }
  return array;
}

absl::StatusOr<std::vector<float>> CopyToHost(GradientView values) {
  if (!values.on_device()) return std::vector<float>(values.host().begin(), values.host().end());
  std::vector<float> host(values.size());
  if (!host.empty()) {
    GPU_RETURN_IF_ERROR(cudaMemcpy(host.data(), values.device(), host.size() * sizeof(float), cudaMemcpyDeviceToHost),
                        "copying device values to the host");
  }
  return host;
}

namespace {

class DeviceFusionBuffers final : public FusionBuffers {
 public:
  ~DeviceFusionBuffers() override {
    for (float* buffer : buffers_) cudaFree(buffer);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  absl::Status Init(const std::vector<int64_t>& group_sizes) {
    if (absl::Status s = CheckGpuWorker(); !s.ok()) return s;
    GPU_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating the fusion stream");
    for (int64_t size : group_sizes) {
      float* buffer = nullptr;
      GPU_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&buffer), static_cast<size_t>(size) * sizeof(float)),
                          absl::StrCat("allocating a fusion buffer of ", size, " floats"));
      buffers_.push_back(buffer);
      sizes_.push_back(static_cast<size_t>(size));
    }
    return absl::OkStatus();
  }

  absl::Status Write(int group, int64_t offset, GradientView values) override {
    if (values.empty()) return absl::OkStatus();
    const void* source = values.on_device() ? static_cast<const void*>(values.device())
                                            : static_cast<const void*>(values.host().data());
    GPU_RETURN_IF_ERROR(cudaMemcpyAsync(buffers_[group] + offset, source, values.size() * sizeof(float),
                                        values.on_device() ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice,
                                        stream_),
                        "fusing a layer gradient");
    // Host memory may be reused as soon as Write returns; device values stay
    // put until Seal (the contract), so their copies overlap the backward pass.
    if (!values.on_device()) GPU_RETURN_IF_ERROR(cudaStreamSynchronize(stream_), "fusing a layer gradient");
    return absl::OkStatus();
  }

  absl::Status Seal(int group) override {
    GPU_RETURN_IF_ERROR(cudaStreamSynchronize(stream_), absl::StrCat("completing fusion group ", group));
    return absl::OkStatus();
  }

  GradientView Get(int group) const override { return GradientView::OnDevice(buffers_[group], sizes_[group]); }

 private:
  cudaStream_t stream_ = nullptr;
  std::vector<float*> buffers_;
  std::vector<size_t> sizes_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<FusionBuffers>> MakeDeviceFusionBuffers(const std::vector<int64_t>& group_sizes) {
  auto buffers = std::make_unique<DeviceFusionBuffers>();
  if (absl::Status s = buffers->Init(group_sizes); !s.ok()) return s;
  return std::unique_ptr<FusionBuffers>(std::move(buffers));
}

}  // namespace sketchfuse
