// Exact top-k on the GPU: a radix select with the result of common/topk.h.
//
// The order is the CPU's: MagnitudeKey(x) (|x| as ordered bits; NaN above
// +inf, +0 ties -0) descending, then index ascending. The selected indices are
// returned in ascending index order with their values, so the GPU result is
// identical, index for index and bit for bit, to TopKIndicesReference (dense)
// and to SketchView::HeavyHitters (sketch).
//
// Algorithm (no sort, no host synchronization; every count stays on the device):
//   1. one pass over the keys builds a histogram of their top 12 bits; a
//      one-block kernel finds the bin b holding the k-th key;
//   2. a second pass writes a bitmap of the keys in bins above b (one word per
//      warp, by ballot) and appends the indices in bin b to a candidate list,
//      counting their remaining 19 bits in a two-level histogram; a one-block
//      kernel reads off the exact k-th key T and how many keys equal to T
//      (ties) to keep;
//   3. the candidates above T, and those equal to T, are marked in two
//      bitmaps; an ordered compaction of the bitmaps writes the indices in
//      ascending order, keeping the ties with the smallest indices.
// Passes over the n inputs: two (plus, for a sketch, the estimate computed in
// the first). The rest touches the candidates (the keys in one of 4096 bins)
// and n/16 bytes of bitmaps.
//
// Every launcher validates its arguments, enqueues work on `stream` and
// returns without synchronizing. A workspace serves one selection at a time:
// reuse it only on the same stream (or after synchronizing).
#ifndef SKETCHFUSE_CUDA_TOPK_KERNELS_H_
#define SKETCHFUSE_CUDA_TOPK_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/count_sketch.h"
#include "cuda/device_buffer.h"

namespace sketchfuse {

// Device scratch memory for selections over up to `capacity` elements:
// 4.25 bytes per element plus 2.1 MB of histograms, and 4 more bytes per
// element when made for sketches (the estimates of every coordinate).
class TopKWorkspace {
 public:
  static absl::StatusOr<TopKWorkspace> Create(uint64_t capacity, bool for_sketches);

  uint64_t capacity() const { return capacity_; }

 private:
  friend absl::Status LaunchTopK(const float*, uint64_t, uint64_t, TopKWorkspace&, uint32_t*,
                                 float*, cudaStream_t);
  friend absl::Status LaunchSketchHeavyHitters(const SketchShape&, const float*, uint64_t,
                                               uint64_t, TopKWorkspace&, uint32_t*, float*,
                                               cudaStream_t);

  uint64_t capacity_ = 0;
  DeviceBuffer<uint32_t> state_;         // counters and histograms
  DeviceBuffer<uint32_t> candidates_;    // indices in the k-th key's bin
  DeviceBuffer<uint32_t> above_bits_;    // bitmap: key > T
  DeviceBuffer<uint32_t> tie_bits_;      // bitmap: key == T
  DeviceBuffer<uint64_t> block_counts_;  // per compaction block: (above << 32) | ties
  DeviceBuffer<float> estimates_;        // sketches only
};

// Writes the min(k, n) entries of x[0, n) that rank first to indices[] (in
// ascending order) and their values to values[]. n <= workspace.capacity()
// and n < 2^32; indices and values must hold min(k, n) elements.
absl::Status LaunchTopK(const float* x, uint64_t n, uint64_t k, TopKWorkspace& workspace,
                        uint32_t* indices, float* values, cudaStream_t stream);

// The heavy hitters of a sketch: the min(k, dim) coordinates of [0, dim) whose
// estimates (median over rows) rank first, in ascending order, with their
// estimates. The estimate is computed in the selection's first pass. The
// workspace must be made for sketches with capacity >= dim.
absl::Status LaunchSketchHeavyHitters(const SketchShape& shape, const float* table, uint64_t dim,
                                      uint64_t k, TopKWorkspace& workspace, uint32_t* indices,
                                      float* values, cudaStream_t stream);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_CUDA_TOPK_KERNELS_H_
