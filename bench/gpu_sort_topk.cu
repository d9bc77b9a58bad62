#include "bench/gpu_sort_topk.h"

#include <algorithm>

#include <cub/device/device_radix_sort.cuh>

#include "absl/strings/str_cat.h"
#include "cuda/cuda_check.h"
#include "cuda/launch_config.h"

namespace sketchfuse {
namespace {

constexpr int kThreads = 256;

__global__ void MagnitudeKeysKernel(const float* x, uint64_t n, uint32_t* keys, uint32_t* index) {
  for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    keys[i] = __float_as_uint(x[i]) & 0x7FFFFFFFu;
    index[i] = static_cast<uint32_t>(i);
  }
}

}  // namespace

absl::StatusOr<SortTopK> SortTopK::Create(uint64_t capacity) {
  if (capacity == 0 || capacity > UINT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("sort top-k: capacity ", capacity, " (1 to 2^32 - 1)"));
  }
  SortTopK sort;
  sort.capacity_ = capacity;
  for (DeviceBuffer<uint32_t>* buffer : {&sort.keys_in_, &sort.keys_out_, &sort.index_in_, &sort.index_out_}) {
    absl::StatusOr<DeviceBuffer<uint32_t>> made = DeviceBuffer<uint32_t>::Allocate(capacity);
    if (!made.ok()) return made.status();
    *buffer = *std::move(made);
  }
  size_t bytes = 0;
  GPU_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairsDescending(nullptr, bytes, sort.keys_in_.data(),
                                                                sort.keys_out_.data(), sort.index_in_.data(),
                                                                sort.index_out_.data(), static_cast<int>(capacity), 0,
                                                                31),
                      "sizing the radix sort");
  absl::StatusOr<DeviceBuffer<unsigned char>> scratch = DeviceBuffer<unsigned char>::Allocate(bytes);
  if (!scratch.ok()) return scratch.status();
  sort.scratch_ = *std::move(scratch);
  return sort;
}

absl::Status SortTopK::Run(const float* x, uint64_t n, uint64_t k, uint32_t* indices, cudaStream_t stream) {
  if (n > capacity_ || n > static_cast<uint64_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat("sort top-k of ", n, " elements; capacity ", capacity_));
  }
  if (n == 0 || k == 0) return absl::OkStatus();
  MagnitudeKeysKernel<<<PersistentBlocks(kThreads, n), kThreads, 0, stream>>>(x, n, keys_in_.data(), index_in_.data());
  GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the key kernel");
  size_t bytes = scratch_.size();
  GPU_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairsDescending(scratch_.data(), bytes, keys_in_.data(),
                                                                keys_out_.data(), index_in_.data(), index_out_.data(),
                                                                static_cast<int>(n), 0, 31, stream),
                      "radix-sorting the keys");
  GPU_RETURN_IF_ERROR(cudaMemcpyAsync(indices, index_out_.data(), std::min(k, n) * sizeof(uint32_t),
                                      cudaMemcpyDeviceToDevice, stream),
                      "copying the first k");
  return absl::OkStatus();
}

}  // namespace sketchfuse
