// Each block copies one chunk of the fused buffer: it finds the first layer
// overlapping the chunk by binary search, then copies layer by layer with all
// its threads (coalesced on both sides).
#include "cuda/fusion_kernels.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "cuda/cuda_check.h"
#include "cuda/launch_config.h"

namespace sketchfuse {
namespace {

constexpr int kThreads = 256;
constexpr uint64_t kChunk = 16 * 1024;

template <bool kPack>
__global__ void CopyKernel(const LayerSlice* layers, const uint64_t* offsets, uint32_t num_layers,
                           uint64_t fused_size, float* fused) {
  __shared__ uint32_t first_layer;
  const uint64_t begin = blockIdx.x * kChunk;
  const uint64_t end = min(begin + kChunk, fused_size);
  if (threadIdx.x == 0) {
    // The last layer l with offsets[l] <= begin (layers may be empty).
    uint32_t lo = 0;
    uint32_t hi = num_layers;  // offsets[num_layers] = fused_size > begin
    while (hi - lo > 1) {
      const uint32_t mid = (lo + hi) / 2;
      if (offsets[mid] <= begin) lo = mid; else hi = mid;
    }
    first_layer = lo;
  }
  __syncthreads();
  for (uint32_t l = first_layer; l < num_layers && offsets[l] < end; ++l) {
    const uint64_t from = max(begin, offsets[l]);
    const uint64_t to = min(end, offsets[l + 1]);
    float* layer = layers[l].data;
    const uint64_t layer_begin = offsets[l];
    for (uint64_t i = from + threadIdx.x; i < to; i += blockDim.x) {
      if constexpr (kPack) {
        fused[i] = layer[i - layer_begin];
      } else {
        layer[i - layer_begin] = fused[i];
      }
    }
  }
}

}  // namespace

absl::StatusOr<FusionLayout> FusionLayout::Create(absl::Span<const LayerSlice> layers) {
  if (layers.empty()) return absl::InvalidArgumentError("a fusion layout needs at least one layer");
  std::vector<uint64_t> offsets(layers.size() + 1, 0);
  for (size_t l = 0; l < layers.size(); ++l) {
    if (layers[l].data == nullptr && layers[l].size > 0) {
      return absl::InvalidArgumentError(absl::StrCat("layer ", l, " has ", layers[l].size,
                                                     " elements and a null pointer"));
    }
    offsets[l + 1] = offsets[l] + layers[l].size;
  }
  if (offsets.back() >= (1ull << 32)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fused group of ", offsets.back(), " elements: a group must be below 2^32"));
  }
  FusionLayout layout;
  absl::StatusOr<DeviceBuffer<LayerSlice>> slices = DeviceBuffer<LayerSlice>::FromHost(layers);
  if (!slices.ok()) return slices.status();
  layout.layers_ = *std::move(slices);
  absl::StatusOr<DeviceBuffer<uint64_t>> device_offsets =
      DeviceBuffer<uint64_t>::FromHost(offsets);
  if (!device_offsets.ok()) return device_offsets.status();
  layout.offsets_ = *std::move(device_offsets);
  layout.fused_size_ = offsets.back();
  layout.num_layers_ = layers.size();
  return layout;
}

absl::Status FusionLayout::Pack(float* fused, cudaStream_t stream) const {
  if (fused_size_ == 0) return absl::OkStatus();
  CopyKernel<true><<<static_cast<unsigned>(BlocksToCover(fused_size_, kChunk)), kThreads, 0,
                     stream>>>(layers_.data(), offsets_.data(),
                               static_cast<uint32_t>(num_layers_), fused_size_, fused);
  GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the layer packing");
  return absl::OkStatus();
}

absl::Status FusionLayout::Unpack(const float* fused, cudaStream_t stream) const {
  if (fused_size_ == 0) return absl::OkStatus();
  CopyKernel<false><<<static_cast<unsigned>(BlocksToCover(fused_size_, kChunk)), kThreads, 0,
                      stream>>>(layers_.data(), offsets_.data(),
                                static_cast<uint32_t>(num_layers_), fused_size_,
                                const_cast<float*>(fused));
  GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the layer unpacking");
  return absl::OkStatus();
}

}  // namespace sketchfuse
