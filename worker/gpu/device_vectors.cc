// device_vectors.h with the CUDA kernels (builds with the toolkit).
#include "worker/gpu/device_vectors.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "cuda/cuda_check.h"
#include "cuda/device_buffer.h"
#include "cuda/finite_kernels.h"
#include "cuda/sparse_kernels.h"
#include "worker/gpu/device_memory.h"

namespace sketchfuse {

absl::Status UseGpu(int index) {
  // Called before every device exchange: cheap queries only (no device
  // properties); CheckGpuWorker words the refusal when there is no GPU.
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    return CheckGpuWorker();
  }
  if (index < 0 || index >= count) {
    return absl::InvalidArgumentError(absl::StrCat("GPU ", index, " does not exist (this process sees ", count, ")"));
  }
  GPU_RETURN_IF_ERROR(cudaSetDevice(index), "selecting the GPU");
  return absl::OkStatus();
}

absl::StatusOr<std::optional<size_t>> FirstNonFiniteOnDevice(GradientView values) {
  if (!values.on_device()) return absl::InvalidArgumentError("a search of device memory got a host view");
  absl::StatusOr<DeviceBuffer<unsigned long long>> first = DeviceBuffer<unsigned long long>::Allocate(1);
  if (!first.ok()) return first.status();
  if (absl::Status s = LaunchFirstNonFinite(values.device(), values.size(), first->data(), nullptr); !s.ok()) {
    return s;
  }
  unsigned long long index = 0;
  GPU_RETURN_IF_ERROR(cudaMemcpy(&index, first->data(), sizeof(index), cudaMemcpyDeviceToHost),
                      "reading the non-finite search");
  if (index == ~0ull) return std::nullopt;
  return static_cast<size_t>(index);
}

absl::Status WriteSparseOnDevice(absl::Span<const uint32_t> indices, absl::Span<const float> values, float* out,
                                 size_t n) {
  if (indices.size() != values.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a sparse write of ", indices.size(), " indices with ", values.size(), " values"));
  }
  for (uint32_t i : indices) {
    if (i >= n) return absl::InvalidArgumentError(absl::StrCat("index ", i, " is outside ", n, " elements"));
  }
  if (out == nullptr && n > 0) return absl::InvalidArgumentError("no output");
  GPU_RETURN_IF_ERROR(cudaMemset(out, 0, n * sizeof(float)), "clearing the update");
  if (indices.empty()) return absl::OkStatus();
  absl::StatusOr<DeviceBuffer<uint32_t>> d_indices = DeviceBuffer<uint32_t>::FromHost(indices);
  if (!d_indices.ok()) return d_indices.status();
  absl::StatusOr<DeviceBuffer<float>> d_values = DeviceBuffer<float>::FromHost(values);
  if (!d_values.ok()) return d_values.status();
  if (absl::Status s = LaunchScatterSet(d_indices->data(), d_values->data(), indices.size(), out, n, nullptr, nullptr);
      !s.ok()) {
    return s;
  }
  GPU_RETURN_IF_ERROR(cudaDeviceSynchronize(), "writing the update");
  return absl::OkStatus();
}

}  // namespace sketchfuse
