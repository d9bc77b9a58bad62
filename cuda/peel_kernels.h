// The peeling decoder of common/sketch_peeling.h on the GPU: the same
// coordinates and the same values, bit for bit, as the CPU's PeelDecode for
// the same table and options.
//
// A pass is four kernels over the coordinates still in play, each thread one
// coordinate with its row estimates in registers, deciding by the rules the
// CPU decoder calls (common/peel_rules.h):
//   1. consider: drop coordinates with a row estimate at or below the floor
//      (for good: they read an empty cell), list the rest, and raise each
//      claimed cell's best agreement (atomicMax);
//   2. count, per cell, the claims with that best agreement;
//   3. take the takeable claims that are alone at the top of every cell they
//      claim (the CPU's Resolve) and mark them taken;
//   4. count how many taken coordinates touch each cell.
// The host then reads the pass's counts (one synchronization per pass) and
// subtracts the taken coordinates from the table: a cell touched by one of
// them directly; the cells touched by several (rare) apply theirs in
// ascending index order, the CPU's order, after a radix sort of (cell,
// index), so that every float rounding is the CPU's. The decode ends when a
// pass takes nothing, after options.max_passes passes, or at
// options.max_entries (that pass keeping its largest magnitudes, ties to the
// smaller index, as the CPU).
//
// NOTE: not thread-safe; a workspace serves one decode at a time, on one
// stream. Unlike the launchers of the other cuda/ headers, PeelDecodeOnDevice
// synchronizes its stream (once per pass, and at the end).
#ifndef SKETCHFUSE_CUDA_PEEL_KERNELS_H_
#define SKETCHFUSE_CUDA_PEEL_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "common/count_sketch.h"
#include "common/sketch_peeling.h"
#include "cuda/device_buffer.h"

namespace sketchfuse {

// Device scratch memory for peeling decodes. It starts empty and grows to what
// the decodes need (about 4 bytes per coordinate of the largest group, 12 per
// cell of the largest sketch, and 8 per coordinate taken), and is kept for the
// next decode.
class PeelWorkspace {
 public:
  PeelWorkspace();
  ~PeelWorkspace();
  PeelWorkspace(PeelWorkspace&&) noexcept;
  PeelWorkspace& operator=(PeelWorkspace&&) noexcept;

 private:
  friend struct PeelDecoder;
  struct Buffers;
  std::unique_ptr<Buffers> buffers_;
};

// A decode's result, in the workspace's device memory: valid until the
// workspace's next decode.
struct DevicePeelResult {
  uint64_t count = 0;                 // coordinates recovered
  const uint32_t* indices = nullptr;  // count indices, ascending
  const float* values = nullptr;      // their values
  uint32_t passes = 0;                // passes run (for profiles and tests)
  uint64_t ordered_subtractions = 0;  // subtractions from cells several taken coordinates shared
};

// Decodes `table` (device memory, shape.num_cells() floats; left unchanged)
// over the coordinates [0, dim) as PeelDecode(SketchView(shape, table), dim,
// options) does on the host. INVALID_ARGUMENT for an invalid shape, dim >=
// 2^32 or a null table; RESOURCE_EXHAUSTED when device memory runs out; a
// one-row sketch, dim 0, max_passes 0 or max_entries 0 recover nothing.
absl::StatusOr<DevicePeelResult> PeelDecodeOnDevice(const SketchShape& shape, const float* table, uint64_t dim,
                                                    const PeelOptions& options, PeelWorkspace& workspace,
                                                    cudaStream_t stream);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_CUDA_PEEL_KERNELS_H_
