// Packing of many layer tensors into one fused buffer and back, in one launch
// each way. A FusionLayout fixes the layers (device pointers and sizes, in
// the order they appear in the fused buffer, usually backward order) and
// keeps their offsets on the device.
#ifndef SKETCHFUSE_CUDA_FUSION_KERNELS_H_
#define SKETCHFUSE_CUDA_FUSION_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "cuda/device_buffer.h"

namespace sketchfuse {

// One layer's tensor in device memory (contiguous floats).
struct LayerSlice {
  float* data = nullptr;
  uint64_t size = 0;
};

class FusionLayout {
 public:
  // INVALID_ARGUMENT for no layers, a null pointer with a non-zero size, or a
  // total of 2^32 elements or more (a fused group is indexed by uint32).
  static absl::StatusOr<FusionLayout> Create(absl::Span<const LayerSlice> layers);

  uint64_t fused_size() const { return fused_size_; }
  size_t num_layers() const { return num_layers_; }

  // fused[offset(l) + j] = layer l's data[j]. `fused` holds fused_size() floats.
  absl::Status Pack(float* fused, cudaStream_t stream) const;
  // layer l's data[j] = fused[offset(l) + j].
  absl::Status Unpack(const float* fused, cudaStream_t stream) const;

 private:
  DeviceBuffer<LayerSlice> layers_;  // device copy of the slices
  DeviceBuffer<uint64_t> offsets_;   // num_layers + 1 prefix sums
  uint64_t fused_size_ = 0;
  size_t num_layers_ = 0;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_CUDA_FUSION_KERNELS_H_
