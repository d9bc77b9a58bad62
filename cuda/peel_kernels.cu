// The peeling decoder on the GPU (see peel_kernels.h for the passes and the
// contract; common/sketch_peeling.cc is the CPU decoder it reproduces).
#include "cuda/peel_kernels.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <numeric>
#include <vector>

#include <cooperative_groups.h>
#include <cub/device/device_radix_sort.cuh>

#include "absl/strings/str_cat.h"
#include "common/peel_rules.h"
#include "cuda/count_sketch_device.cu.h"
#include "cuda/cuda_check.h"
#include "cuda/launch_config.h"

namespace sketchfuse {
namespace {

constexpr int kThreads = 256;

// A listed coordinate that was taken (dim < 2^32: no coordinate has this index).
constexpr uint32_t kTaken = 0xFFFFFFFFu;

// The decode's counters (uint32 words of device memory). The first
// kPassCounters are zeroed at the start of every pass and read back after it.
enum Counter : int {
  kConsidered = 0,  // coordinates listed by the consider kernel
  kWinners = 1,     // coordinates taken
  kShared = 2,      // (taken coordinate, row) pairs whose cell another taken coordinate touches
  kQueued = 3,      // of those, queued by the subtract kernel so far
  kOverflow = 4,    // nonzero: more coordinates taken than cells / 2 (impossible; checked)
  kPassCounters = 5,
  kLargest = 5,     // bits of the largest |cell| of the table to decode (NaN cells skipped)
  kNumCounters = 6,
};

// What every pass kernel needs: the hashes, the agreement tolerance and the
// floor (floor_fraction times the largest |cell|, computed on the device the
// way the CPU computes it).
struct PassParams {
  SketchHashParams hash;
  float tolerance;
  float floor_fraction;
  const uint32_t* counters;
};

// The best agreement and the number of claims with it, per cell, packed into
// one word: agreement << 32 | claims.
__device__ __forceinline__ unsigned long long TopClaim(uint32_t agree, uint32_t claims) {
  return static_cast<unsigned long long>(agree) << 32 | claims;
}

template <int kRows>
__device__ __forceinline__ uint32_t RowsOf(const SketchHashParams& p) {
  return kRows > 0 ? static_cast<uint32_t>(kRows) : p.rows;
}

// Room for a coordinate's row estimates: registers for a fixed row count.
template <int kRows>
struct RowEstimates {
  float v[kRows > 0 ? kRows : kMaxSketchRows];
};

__device__ __forceinline__ size_t TableIndex(const SketchHashParams& p, uint32_t r, const CoordinateKeys& keys) {
  return static_cast<size_t>(r) * p.cols + CellOf(p, r, keys);
}

// Coordinate i's row estimates, row by row, stopping at the first one at or
// below the floor (false): the CPU decoder's test, in its order.
template <int kRows>
__device__ __forceinline__ bool EstimatesAboveFloor(const SketchHashParams& p, const float* table,
                                                    const CoordinateKeys& keys, float floor,
                                                    RowEstimates<kRows>& est) {
  const uint32_t rows = RowsOf<kRows>(p);
#pragma unroll
  for (uint32_t r = 0; r < rows; ++r) {
    est.v[r] = SignIn(p, r, keys) * table[TableIndex(p, r, keys)];
    if (!(fabsf(est.v[r]) > floor)) return false;
  }
  return true;
}

// The claim of a coordinate above the floor, if it makes one.
template <int kRows>
__device__ __forceinline__ bool ClaimOf(const PassParams& p, const RowEstimates<kRows>& est,
                                        peel_rules::Claim* claim) {
  const uint32_t rows = RowsOf<kRows>(p.hash);
  return peel_rules::SomePairAgrees(est.v, 1, rows, p.tolerance) &&
         peel_rules::Claims(est.v, 1, rows, p.tolerance, claim);
}

__device__ __forceinline__ float FloorOf(const PassParams& p) {
  return p.floor_fraction * __uint_as_float(p.counters[kLargest]);
}

// A slot of *counter for each calling thread, with one atomic per group of
// converged callers (the warp-aggregated atomic of cooperative groups).
__device__ __forceinline__ uint32_t WarpAggregatedSlot(uint32_t* counter) {
  namespace cg = cooperative_groups;
  const cg::coalesced_group callers = cg::coalesced_threads();
  uint32_t base = 0;
  if (callers.thread_rank() == 0) base = atomicAdd(counter, static_cast<uint32_t>(callers.num_threads()));
  return callers.shfl(base, 0) + static_cast<uint32_t>(callers.thread_rank());
}

// counters[kLargest] = bits of max |cell| over the cells that are not NaN
// (for non-negative floats the bits order as the values).
__global__ void __launch_bounds__(kThreads) LargestMagnitudeKernel(const float* table, uint64_t cells,
                                                                   uint32_t* counters) {
  uint32_t best = 0;
  for (uint64_t c = blockIdx.x * blockDim.x + threadIdx.x; c < cells; c += gridDim.x * blockDim.x) {
    const float x = table[c];
    if (x == x) best = max(best, __float_as_uint(fabsf(x)));
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) best = max(best, __shfl_down_sync(0xFFFFFFFFu, best, offset));
  if ((threadIdx.x & 31) == 0) atomicMax(&counters[kLargest], best);
}

// Pass step 1. The coordinates of the source (the first pass: all of [0,
// count)) above the floor in every row are listed; each claimed cell's best
// agreement is raised to the claim's.
template <int kRows, bool kFirstPass>
__global__ void __launch_bounds__(kThreads)
    ConsiderKernel(PassParams p, const float* table, const uint32_t* source, uint32_t count, uint32_t* listed,
                   uint32_t* counters, unsigned long long* cell_claims) {
  const float floor = FloorOf(p);
  for (uint64_t j = blockIdx.x * blockDim.x + threadIdx.x; j < count; j += gridDim.x * blockDim.x) {
    const uint32_t i = kFirstPass ? static_cast<uint32_t>(j) : source[j];
    if (!kFirstPass && i == kTaken) continue;
    const CoordinateKeys keys = KeysOf(p.hash, i);
    RowEstimates<kRows> est;
    if (!EstimatesAboveFloor<kRows>(p.hash, table, keys, floor, est)) continue;
    listed[WarpAggregatedSlot(&counters[kConsidered])] = i;
    peel_rules::Claim claim;
    if (!ClaimOf<kRows>(p, est, &claim)) continue;
    for (uint32_t r = 0; r < RowsOf<kRows>(p.hash); ++r) {
      if (claim.rows >> r & 1) atomicMax(&cell_claims[TableIndex(p.hash, r, keys)], TopClaim(claim.agree, 0));
    }
  }
}

// Pass step 2: per cell, the claims with its best agreement are counted.
template <int kRows>
__global__ void __launch_bounds__(kThreads)
    CountTopClaimsKernel(PassParams p, const float* table, const uint32_t* listed, const uint32_t* counters,
                         unsigned long long* cell_claims) {
  const float floor = FloorOf(p);
  const uint32_t count = counters[kConsidered];
  for (uint64_t j = blockIdx.x * blockDim.x + threadIdx.x; j < count; j += gridDim.x * blockDim.x) {
    const CoordinateKeys keys = KeysOf(p.hash, listed[j]);
    RowEstimates<kRows> est;
    peel_rules::Claim claim;
    if (!EstimatesAboveFloor<kRows>(p.hash, table, keys, floor, est) || !ClaimOf<kRows>(p, est, &claim)) continue;
    for (uint32_t r = 0; r < RowsOf<kRows>(p.hash); ++r) {
      if ((claim.rows >> r & 1) == 0) continue;
      unsigned long long* cell = &cell_claims[TableIndex(p.hash, r, keys)];
      // The high word (the best agreement) is fixed since step 1; other
      // threads only add to the low word, which never carries into it.
      if ((*cell >> 32) == claim.agree) atomicAdd(cell, 1ull);
    }
  }
}

// Pass step 3: a takeable claim alone at the top of every cell it claims is
// taken: (index, value) into the winners, its list entry marked kTaken.
template <int kRows>
__global__ void __launch_bounds__(kThreads)
    TakeKernel(PassParams p, const float* table, uint32_t* listed, uint32_t* counters,
               const unsigned long long* cell_claims, uint32_t* win_index, float* win_value, uint32_t capacity) {
  const float floor = FloorOf(p);
  const uint32_t count = counters[kConsidered];
  for (uint64_t j = blockIdx.x * blockDim.x + threadIdx.x; j < count; j += gridDim.x * blockDim.x) {
    const uint32_t i = listed[j];
    const CoordinateKeys keys = KeysOf(p.hash, i);
    RowEstimates<kRows> est;
    peel_rules::Claim claim;
    if (!EstimatesAboveFloor<kRows>(p.hash, table, keys, floor, est) || !ClaimOf<kRows>(p, est, &claim) ||
        !claim.takeable) {
      continue;
    }
    bool alone = true;
    for (uint32_t r = 0; r < RowsOf<kRows>(p.hash); ++r) {
      if ((claim.rows >> r & 1) && cell_claims[TableIndex(p.hash, r, keys)] != TopClaim(claim.agree, 1)) {
        alone = false;
      }
    }
    if (!alone) continue;
    const uint32_t slot = WarpAggregatedSlot(&counters[kWinners]);
    if (slot >= capacity) {
      atomicExch(&counters[kOverflow], 1u);
      continue;
    }
    win_index[slot] = i;
    win_value[slot] = claim.value;
    listed[j] = kTaken;
  }
}

// Pass step 4: how many taken coordinates touch each cell (every row of
// each), and how many (coordinate, row) pairs land in cells touched more than
// once.
__global__ void __launch_bounds__(kThreads)
    CountTouchesKernel(SketchHashParams p, const uint32_t* win_index, uint32_t* counters, uint32_t* touches,
                       uint32_t capacity) {
  // (More winners than the capacity fails the decode after this pass.)
  const uint64_t pairs = uint64_t{min(counters[kWinners], capacity)} * p.rows;
  for (uint64_t t = blockIdx.x * blockDim.x + threadIdx.x; t < pairs; t += gridDim.x * blockDim.x) {
    const uint32_t r = static_cast<uint32_t>(t % p.rows);
    const size_t cell = TableIndex(p, r, KeysOf(p, win_index[t / p.rows]));
    const uint32_t before = atomicAdd(&touches[cell], 1u);
    if (before == 1) {
      atomicAdd(&counters[kShared], 2u);  // this pair and the first one
    } else if (before > 1) {
      atomicAdd(&counters[kShared], 1u);
    }
  }
}

// Subtracts the taken coordinates from the cells only one of them touches;
// queues the others' (cell << 32 | index, sign * value) for the ordered pass.
__global__ void __launch_bounds__(kThreads)
    SubtractKernel(SketchHashParams p, const uint32_t* win_index, const float* win_value, uint32_t* counters,
                   const uint32_t* touches, float* table, unsigned long long* queue_keys, float* queue_deltas) {
  const uint64_t pairs = uint64_t{counters[kWinners]} * p.rows;
  for (uint64_t t = blockIdx.x * blockDim.x + threadIdx.x; t < pairs; t += gridDim.x * blockDim.x) {
    const uint32_t r = static_cast<uint32_t>(t % p.rows);
    const uint32_t i = win_index[t / p.rows];
    const CoordinateKeys keys = KeysOf(p, i);
    const size_t cell = TableIndex(p, r, keys);
    const float delta = SignIn(p, r, keys) * win_value[t / p.rows];
    if (touches[cell] == 1) {
      table[cell] = table[cell] - delta;
    } else {
      const uint32_t slot = atomicAdd(&counters[kQueued], 1u);
      queue_keys[slot] = static_cast<unsigned long long>(cell) << 32 | i;
      queue_deltas[slot] = delta;
    }
  }
}

// The queued subtractions, sorted by (cell, index): the first entry of each
// cell's run applies the run in order.
__global__ void __launch_bounds__(kThreads)
    ApplyQueuedKernel(const unsigned long long* keys, const float* deltas, uint32_t count, float* table) {
  for (uint64_t j = blockIdx.x * blockDim.x + threadIdx.x; j < count; j += gridDim.x * blockDim.x) {
    const unsigned long long cell = keys[j] >> 32;
    if (j > 0 && (keys[j - 1] >> 32) == cell) continue;
    float value = table[cell];
    for (uint64_t m = j; m < count && (keys[m] >> 32) == cell; ++m) value = value - deltas[m];
    table[cell] = value;
  }
}

// Bits needed to write every value up to `largest`.
int BitsFor(uint64_t largest) {
  int bits = 1;
  while (bits < 64 && (largest >> bits) != 0) ++bits;
  return bits;
}

// Makes `buffer` hold at least `size` elements (growing by half again, so
// that a run of slightly larger decodes does not reallocate each time);
// `keep` elements are copied over. Synchronizes before freeing the old one.
template <typename T>
absl::Status Reserve(DeviceBuffer<T>& buffer, size_t size, cudaStream_t stream, size_t keep = 0) {
  if (buffer.size() >= size) return absl::OkStatus();
  absl::StatusOr<DeviceBuffer<T>> grown = DeviceBuffer<T>::Allocate(std::max(size, buffer.size() + buffer.size() / 2));
  if (!grown.ok()) return grown.status();
  if (keep > 0) {
    GPU_RETURN_IF_ERROR(cudaMemcpyAsync(grown->data(), buffer.data(), keep * sizeof(T), cudaMemcpyDeviceToDevice,
                                        stream),
                        "copying a growing peel buffer");
  }
  GPU_RETURN_IF_ERROR(cudaStreamSynchronize(stream), "growing a peel buffer");
  buffer = *std::move(grown);
  return absl::OkStatus();
}

}  // namespace

struct PeelWorkspace::Buffers {
  ~Buffers() {
    if (host_counters != nullptr) cudaFreeHost(host_counters);
  }

  DeviceBuffer<float> table;                     // the table as peeled so far
  DeviceBuffer<unsigned long long> cell_claims;  // TopClaim per cell
  DeviceBuffer<uint32_t> touches;                // taken coordinates per cell
  DeviceBuffer<uint32_t> lists[2];               // coordinates in play, this pass's and the last
  DeviceBuffer<uint32_t> win_index;              // the pass's taken coordinates
  DeviceBuffer<float> win_value;
  DeviceBuffer<unsigned long long> queue_keys[2];  // shared-cell subtractions, unsorted and sorted
  DeviceBuffer<float> queue_deltas[2];
  DeviceBuffer<uint32_t> entry_index[2];  // every taken coordinate, in pass order and sorted
  DeviceBuffer<float> entry_value[2];
  DeviceBuffer<unsigned char> sort_scratch;
  DeviceBuffer<uint32_t> counters;
  uint32_t* host_counters = nullptr;  // pinned, kNumCounters words
};

PeelWorkspace::PeelWorkspace() : buffers_(std::make_unique<Buffers>()) {}
PeelWorkspace::~PeelWorkspace() = default;
PeelWorkspace::PeelWorkspace(PeelWorkspace&&) noexcept = default;
PeelWorkspace& PeelWorkspace::operator=(PeelWorkspace&&) noexcept = default;

// One decode: the host side of the passes.
struct PeelDecoder {
  // Four rows (the default sketch) with the estimates in registers; any
  // other count with them in local memory.
  static absl::StatusOr<DevicePeelResult> Decode(const SketchShape& shape, const float* table, uint32_t dim,
                                                 const PeelOptions& options, PeelWorkspace& workspace,
                                                 cudaStream_t stream) {
    if (shape.rows == 4) return Run<4>(shape, table, dim, options, *workspace.buffers_, stream);
    return Run<0>(shape, table, dim, options, *workspace.buffers_, stream);
  }

  template <int kRows>
  static absl::StatusOr<DevicePeelResult> Run(const SketchShape& shape, const float* table, uint32_t dim,
                                              const PeelOptions& options, PeelWorkspace::Buffers& b,
                                              cudaStream_t stream);

  // Radix-sorts `count` (key, value) pairs on the low `bits` bits of the keys.
  template <typename Key, typename Value>
  static absl::Status SortPairs(PeelWorkspace::Buffers& b, const Key* keys_in, Key* keys_out,
                                const Value* values_in, Value* values_out, uint64_t count, int bits,
                                cudaStream_t stream) {
    if (count == 0) return absl::OkStatus();
    if (count > static_cast<uint64_t>(INT_MAX)) {
      return absl::ResourceExhaustedError(absl::StrCat("peel decode: ", count, " entries to sort"));
    }
    size_t bytes = 0;
    GPU_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys_in, keys_out, values_in, values_out,
                                                        static_cast<int>(count), 0, bits, stream),
                        "sizing a radix sort");
    if (absl::Status s = Reserve(b.sort_scratch, bytes, stream); !s.ok()) return s;
    GPU_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairs(b.sort_scratch.data(), bytes, keys_in, keys_out, values_in,
                                                        values_out, static_cast<int>(count), 0, bits, stream),
                        "radix-sorting peel entries");
    return absl::OkStatus();
  }

  // The pass that reaches max_entries keeps its `room` largest magnitudes
  // (ties: the smaller index), as the CPU decoder: on the host, since it
  // happens at most once per decode.
  static absl::Status KeepLargest(PeelWorkspace::Buffers& b, uint32_t winners, uint64_t room, cudaStream_t stream) {
    std::vector<uint32_t> index(winners);
    std::vector<float> value(winners);
    GPU_RETURN_IF_ERROR(cudaMemcpyAsync(index.data(), b.win_index.data(), winners * sizeof(uint32_t),
                                        cudaMemcpyDeviceToHost, stream),
                        "reading the last pass's coordinates");
    GPU_RETURN_IF_ERROR(cudaMemcpyAsync(value.data(), b.win_value.data(), winners * sizeof(float),
                                        cudaMemcpyDeviceToHost, stream),
                        "reading the last pass's values");
    GPU_RETURN_IF_ERROR(cudaStreamSynchronize(stream), "reading the last pass");
    std::vector<uint32_t> order(winners);
    std::iota(order.begin(), order.end(), 0u);
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t c) {
      const float fa = std::fabs(value[a]), fc = std::fabs(value[c]);
      return fa != fc ? fa > fc : index[a] < index[c];
    });
    std::vector<uint32_t> kept_index(room);
    std::vector<float> kept_value(room);
    for (uint64_t j = 0; j < room; ++j) {
      kept_index[j] = index[order[j]];
      kept_value[j] = value[order[j]];
    }
    GPU_RETURN_IF_ERROR(cudaMemcpyAsync(b.win_index.data(), kept_index.data(), room * sizeof(uint32_t),
                                        cudaMemcpyHostToDevice, stream),
                        "writing the kept coordinates");
    GPU_RETURN_IF_ERROR(cudaMemcpyAsync(b.win_value.data(), kept_value.data(), room * sizeof(float),
                                        cudaMemcpyHostToDevice, stream),
                        "writing the kept values");
    GPU_RETURN_IF_ERROR(cudaStreamSynchronize(stream), "writing the kept coordinates");
    return absl::OkStatus();
  }
};

template <int kRows>
absl::StatusOr<DevicePeelResult> PeelDecoder::Run(const SketchShape& shape, const float* table, uint32_t dim,
                                                  const PeelOptions& options, PeelWorkspace::Buffers& b,
                                                  cudaStream_t stream) {
  const uint64_t cells = shape.num_cells();
  const uint64_t win_capacity = cells / 2 + 1;  // each taken coordinate owns two cells or more in its pass
  for (absl::Status s : {Reserve(b.counters, kNumCounters, stream), Reserve(b.table, cells, stream),
                         Reserve(b.cell_claims, cells, stream), Reserve(b.touches, cells, stream),
                         Reserve(b.lists[0], dim, stream), Reserve(b.win_index, win_capacity, stream),
                         Reserve(b.win_value, win_capacity, stream)}) {
    if (!s.ok()) return s;
  }
  if (b.host_counters == nullptr) {
    GPU_RETURN_IF_ERROR(cudaMallocHost(reinterpret_cast<void**>(&b.host_counters), kNumCounters * sizeof(uint32_t)),
                        "allocating the peel counters");
  }
  GPU_RETURN_IF_ERROR(cudaMemcpyAsync(b.table.data(), table, cells * sizeof(float), cudaMemcpyDeviceToDevice, stream),
                      "copying the table to peel");
  GPU_RETURN_IF_ERROR(cudaMemsetAsync(b.cell_claims.data(), 0, cells * sizeof(unsigned long long), stream),
                      "clearing the cell claims");
  GPU_RETURN_IF_ERROR(cudaMemsetAsync(b.touches.data(), 0, cells * sizeof(uint32_t), stream),
                      "clearing the cell touches");
  GPU_RETURN_IF_ERROR(cudaMemsetAsync(b.counters.data(), 0, kNumCounters * sizeof(uint32_t), stream),
                      "clearing the peel counters");
  LargestMagnitudeKernel<<<PersistentBlocks(kThreads, cells), kThreads, 0, stream>>>(b.table.data(), cells,
                                                                                      b.counters.data());
  GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the largest-cell kernel");

  const PassParams params{MakeSketchHashParams(shape), options.tolerance, options.floor, b.counters.data()};
  DevicePeelResult result;
  uint64_t taken = 0;
  uint32_t source_count = dim;  // the first pass's source: every coordinate
  int listed = 0;               // the list this pass writes; the source is the other one
  for (uint32_t pass = 0;; ++pass) {
    if (pass > 0) {
      if (absl::Status s = Reserve(b.lists[listed], source_count, stream); !s.ok()) return s;
    }
    GPU_RETURN_IF_ERROR(cudaMemsetAsync(b.counters.data(), 0, kPassCounters * sizeof(uint32_t), stream),
                        "clearing the pass counters");
    const int grid = PersistentBlocks(kThreads, source_count);
    uint32_t* list = b.lists[listed].data();
    if (pass == 0) {
      ConsiderKernel<kRows, true><<<grid, kThreads, 0, stream>>>(params, b.table.data(), nullptr, source_count, list,
                                                                 b.counters.data(), b.cell_claims.data());
    } else {
      ConsiderKernel<kRows, false><<<grid, kThreads, 0, stream>>>(params, b.table.data(), b.lists[1 - listed].data(),
                                                                  source_count, list, b.counters.data(),
                                                                  b.cell_claims.data());
    }
    CountTopClaimsKernel<kRows><<<grid, kThreads, 0, stream>>>(params, b.table.data(), list, b.counters.data(),
                                                               b.cell_claims.data());
    TakeKernel<kRows><<<grid, kThreads, 0, stream>>>(params, b.table.data(), list, b.counters.data(),
                                                     b.cell_claims.data(), b.win_index.data(), b.win_value.data(),
                                                     static_cast<uint32_t>(win_capacity));
    const int pair_grid = PersistentBlocks(kThreads, std::min<uint64_t>(source_count, win_capacity) * shape.rows);
    CountTouchesKernel<<<pair_grid, kThreads, 0, stream>>>(params.hash, b.win_index.data(), b.counters.data(),
                                                           b.touches.data(), static_cast<uint32_t>(win_capacity));
    GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching a peel pass");
    GPU_RETURN_IF_ERROR(cudaMemcpyAsync(b.host_counters, b.counters.data(), kPassCounters * sizeof(uint32_t),
                                        cudaMemcpyDeviceToHost, stream),
                        "reading the pass counters");
    GPU_RETURN_IF_ERROR(cudaStreamSynchronize(stream), "running a peel pass");
    result.passes = pass + 1;
    if (b.host_counters[kOverflow] != 0) {
      return absl::InternalError(absl::StrCat("peel decode: pass ", pass, " took more coordinates than ",
                                              win_capacity, " (half the sketch's cells)"));
    }
    const uint32_t considered = b.host_counters[kConsidered];
    uint32_t winners = b.host_counters[kWinners];
    const uint32_t shared = b.host_counters[kShared];
    if (winners == 0) break;
    // As the CPU: after a pass that took something, another one runs while
    // passes and room remain.
    bool last = pass + 1 >= options.max_passes;
    const uint64_t room = options.max_entries - taken;
    if (winners >= room) {
      if (winners > room) {
        if (absl::Status s = KeepLargest(b, winners, room, stream); !s.ok()) return s;
        winners = static_cast<uint32_t>(room);
      }
      last = true;
    }
    if (!last) {  // the table is read again only by a next pass
      for (int q = 0; q < 2; ++q) {
        if (absl::Status s = Reserve(b.queue_keys[q], shared, stream); !s.ok()) return s;
        if (absl::Status s = Reserve(b.queue_deltas[q], shared, stream); !s.ok()) return s;
      }
      SubtractKernel<<<pair_grid, kThreads, 0, stream>>>(params.hash, b.win_index.data(), b.win_value.data(),
                                                         b.counters.data(), b.touches.data(), b.table.data(),
                                                         b.queue_keys[0].data(), b.queue_deltas[0].data());
      GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the peel subtraction");
      if (shared > 0) {
        if (absl::Status s = SortPairs(b, b.queue_keys[0].data(), b.queue_keys[1].data(), b.queue_deltas[0].data(),
                                       b.queue_deltas[1].data(), shared, 32 + BitsFor(cells - 1), stream);
            !s.ok()) {
          return s;
        }
        ApplyQueuedKernel<<<PersistentBlocks(kThreads, shared), kThreads, 0, stream>>>(
            b.queue_keys[1].data(), b.queue_deltas[1].data(), shared, b.table.data());
        GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the ordered peel subtraction");
        result.ordered_subtractions += shared;
      }
      GPU_RETURN_IF_ERROR(cudaMemsetAsync(b.cell_claims.data(), 0, cells * sizeof(unsigned long long), stream),
                          "clearing the cell claims");
      GPU_RETURN_IF_ERROR(cudaMemsetAsync(b.touches.data(), 0, cells * sizeof(uint32_t), stream),
                          "clearing the cell touches");
    }
    if (absl::Status s = Reserve(b.entry_index[0], taken + winners, stream, taken); !s.ok()) return s;
    if (absl::Status s = Reserve(b.entry_value[0], taken + winners, stream, taken); !s.ok()) return s;
    GPU_RETURN_IF_ERROR(cudaMemcpyAsync(b.entry_index[0].data() + taken, b.win_index.data(),
                                        winners * sizeof(uint32_t), cudaMemcpyDeviceToDevice, stream),
                        "keeping the pass's coordinates");
    GPU_RETURN_IF_ERROR(cudaMemcpyAsync(b.entry_value[0].data() + taken, b.win_value.data(), winners * sizeof(float),
                                        cudaMemcpyDeviceToDevice, stream),
                        "keeping the pass's values");
    taken += winners;
    if (last) break;
    source_count = considered;
    listed = 1 - listed;
  }

  if (absl::Status s = Reserve(b.entry_index[1], taken, stream); !s.ok()) return s;
  if (absl::Status s = Reserve(b.entry_value[1], taken, stream); !s.ok()) return s;
  if (absl::Status s = SortPairs(b, b.entry_index[0].data(), b.entry_index[1].data(), b.entry_value[0].data(),
                                 b.entry_value[1].data(), taken, BitsFor(dim - 1), stream);
      !s.ok()) {
    return s;
  }
  GPU_RETURN_IF_ERROR(cudaStreamSynchronize(stream), "finishing a peel decode");
  result.count = taken;
  result.indices = b.entry_index[1].data();
  result.values = b.entry_value[1].data();
  return result;
}

absl::StatusOr<DevicePeelResult> PeelDecodeOnDevice(const SketchShape& shape, const float* table, uint64_t dim,
                                                    const PeelOptions& options, PeelWorkspace& workspace,
                                                    cudaStream_t stream) {
  if (absl::Status s = ValidateSketchShape(shape); !s.ok()) return s;
  if (dim >= (uint64_t{1} << 32)) {
    return absl::InvalidArgumentError(absl::StrCat("peel decode: a group of ", dim, " coordinates (at most 2^32 - 1)"));
  }
  if (shape.num_cells() >= (uint64_t{1} << 32)) {
    return absl::InvalidArgumentError(
        absl::StrCat("peel decode on the GPU: a sketch of ", shape.num_cells(), " cells (at most 2^32 - 1)"));
  }
  if (table == nullptr) return absl::InvalidArgumentError("peel decode: no table");
  if (shape.rows < 2 || dim == 0 || options.max_passes == 0 || options.max_entries == 0) return DevicePeelResult{};
  return PeelDecoder::Decode(shape, table, static_cast<uint32_t>(dim), options, workspace, stream);
}

}  // namespace sketchfuse
