// A yardstick for the GPU benchmark's exact top-k: the k largest magnitudes
// of a vector by CUB's radix sort of all n keys (|x| as ordered bits,
// descending; the sort is stable, so equal keys keep the smaller index
// first, the order of cuda/topk_kernels.h). CUDA 13.0's CUB has no
// DeviceTopK; a full sort is what a library user would otherwise write.
#ifndef SKETCHFUSE_BENCH_GPU_SORT_TOPK_H_
#define SKETCHFUSE_BENCH_GPU_SORT_TOPK_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "cuda/device_buffer.h"

namespace sketchfuse {

class SortTopK {
 public:
  // Scratch for vectors of up to `capacity` elements (n < 2^32): 16 bytes
  // per element plus CUB's temporary storage.
  static absl::StatusOr<SortTopK> Create(uint64_t capacity);

  // Writes the indices of the min(k, n) largest |x[i]| to indices (device,
  // in the order of the sort: magnitude descending, then index ascending).
  // Enqueues on `stream`.
  absl::Status Run(const float* x, uint64_t n, uint64_t k, uint32_t* indices, cudaStream_t stream);

 private:
  uint64_t capacity_ = 0;
  DeviceBuffer<uint32_t> keys_in_, keys_out_, index_in_, index_out_;
  DeviceBuffer<unsigned char> scratch_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_BENCH_GPU_SORT_TOPK_H_
