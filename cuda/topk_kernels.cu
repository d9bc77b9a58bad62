// Radix-select top-k (see topk_kernels.h for the algorithm and its contract).
#include "cuda/topk_kernels.h"

#include <algorithm>

#include <cub/block/block_scan.cuh>

#include "absl/strings/str_cat.h"
#include "cuda/count_sketch_device.cu.h"
#include "cuda/cuda_check.h"
#include "cuda/launch_config.h"

namespace sketchfuse {
namespace {

// Keys are 31 bits (MagnitudeKey). The first digit is the top 12 bits; the
// remaining 19 are split into a coarse 10-bit and a fine 9-bit digit.
constexpr uint32_t kDigit1Shift = 19;
constexpr uint32_t kDigit1Bins = 1u << 12;
constexpr uint32_t kRestMask = (1u << kDigit1Shift) - 1;
constexpr uint32_t kFineBits = 9;
constexpr uint32_t kCoarseBins = 1u << 10;
constexpr uint32_t kFineBins = 1u << kFineBits;

// Layout of the workspace's state array (uint32 words).
enum StateSlot : uint32_t {
  kBin = 0,          // the first digit of the k-th key
  kNeedInBin = 1,    // how many of the k come from that bin
  kNumCandidates = 2,
  kThreshold = 3,    // the k-th key T
  kTiesToKeep = 4,   // how many keys equal to T are selected
  kHistogram1 = 8,
  kCoarse2 = kHistogram1 + kDigit1Bins,
  kFine2 = kCoarse2 + kCoarseBins,
  kStateWords = kFine2 + kCoarseBins * kFineBins,
};

constexpr int kPassThreads = 512;
constexpr int kPickThreads = 1024;
constexpr int kWordsPerThread = 4;
constexpr int kCompactThreads = 256;
constexpr uint64_t kWordsPerCompactBlock = kCompactThreads * kWordsPerThread;

__device__ __forceinline__ uint32_t KeyOf(float x) { return __float_as_uint(x) & 0x7FFFFFFFu; }

// Pass 1: histogram of the first digit, in shared memory per block. With a
// sketch, the keys are those of the estimates, which are also stored.
template <bool kFromSketch>
__global__ void __launch_bounds__(kPassThreads)
    HistogramKernel(const float* x, SketchHashParams sketch, const float* table, uint32_t n,
                    float* estimates, uint32_t* state) {
  __shared__ uint32_t local[kDigit1Bins];
  for (uint32_t b = threadIdx.x; b < kDigit1Bins; b += blockDim.x) local[b] = 0;
  __syncthreads();
  const uint32_t stride = gridDim.x * blockDim.x;
  for (uint64_t base = blockIdx.x * blockDim.x + threadIdx.x; base < n; base += 4 * stride) {
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint64_t i = base + static_cast<uint64_t>(j) * stride;
      if (i < n) {
        if constexpr (kFromSketch) {
          v[j] = EstimateOf(sketch, table, static_cast<uint32_t>(i));
          estimates[i] = v[j];
        } else {
          v[j] = x[i];
        }
      }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (base + static_cast<uint64_t>(j) * stride < n) {
        atomicAdd(&local[KeyOf(v[j]) >> kDigit1Shift], 1u);
      }
    }
  }
  __syncthreads();
  for (uint32_t b = threadIdx.x; b < kDigit1Bins; b += blockDim.x) {
    if (local[b] != 0) atomicAdd(&state[kHistogram1 + b], local[b]);
  }
}

// Pass 1 for a wide sketch with exactly kRows rows (UseStagedEstimates): a
// block per chunk, its estimates from cells staged with 16-byte loads
// (EstimateChunk); the estimates are stored and counted as in HistogramKernel.
template <int kRows>
__global__ void __launch_bounds__(kChunkThreads)
    SketchHistogramWideKernel(SketchHashParams sketch, const float* table, uint32_t n,
                              float* estimates, uint32_t* state) {
  __shared__ uint32_t local[kDigit1Bins];
  __shared__ float staged[kRows * kMaxChunkLength];
  for (uint32_t b = threadIdx.x; b < kDigit1Bins; b += blockDim.x) local[b] = 0;
  // (EstimateChunk's first barrier orders these stores before any count.)
  ForEachStagedEstimate<kRows>(sketch, table, n, staged, [&](uint32_t i, float estimate) {
    estimates[i] = estimate;
    atomicAdd(&local[KeyOf(estimate) >> kDigit1Shift], 1u);
  });
  __syncthreads();
  for (uint32_t b = threadIdx.x; b < kDigit1Bins; b += blockDim.x) {
    if (local[b] != 0) atomicAdd(&state[kHistogram1 + b], local[b]);
  }
}

// Finds, among `bins` counts taken from the highest bin down, the bin where
// the running count reaches `need`. Thread t owns bins_per_thread consecutive
// bins of the descending order. Returns (via shared memory) the bin and how
// many of `need` it must supply. One block of kPickThreads.
template <int kBinsPerThread>
__device__ void FindBinOfRank(const uint32_t* counts, uint32_t bins, uint32_t need,
                              uint32_t* found_bin, uint32_t* need_in_bin) {
  using Scan = cub::BlockScan<uint32_t, kPickThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  uint32_t mine[kBinsPerThread];
  uint32_t sum = 0;
#pragma unroll
  for (int j = 0; j < kBinsPerThread; ++j) {
    const uint32_t rank = threadIdx.x * kBinsPerThread + j;  // 0 = highest bin
    mine[j] = rank < bins ? counts[bins - 1 - rank] : 0;
    sum += mine[j];
  }
  uint32_t before = 0;
  Scan(scan_storage).ExclusiveSum(sum, before);
#pragma unroll
  for (int j = 0; j < kBinsPerThread; ++j) {
    if (before < need && before + mine[j] >= need) {
      *found_bin = bins - 1 - (threadIdx.x * kBinsPerThread + j);
      *need_in_bin = need - before;
    }
    before += mine[j];
  }
}

__global__ void __launch_bounds__(kPickThreads) PickBinKernel(uint32_t k, uint32_t* state) {
  __shared__ uint32_t bin, need;
  FindBinOfRank<kDigit1Bins / kPickThreads>(state + kHistogram1, kDigit1Bins, k, &bin, &need);
  __syncthreads();
  if (threadIdx.x == 0) {
    state[kBin] = bin;
    state[kNeedInBin] = need;
  }
}

// Pass 2: bitmap of the keys whose first digit is above the k-th's (one word
// per warp and 32 consecutive indices, so no atomics), the tie bitmap zeroed,
// and the indices in the k-th's bin appended to the candidates and counted by
// their remaining bits.
__global__ void __launch_bounds__(kPassThreads)
    PartitionKernel(const float* x, uint32_t n, uint32_t* state, uint32_t* candidates,
                    uint32_t* above_bits, uint32_t* tie_bits) {
  const uint32_t bin = state[kBin];
  const uint32_t lane = threadIdx.x & 31;
  const uint32_t words = (n + 31) / 32;
  const uint32_t warps = gridDim.x * (blockDim.x / 32);
  for (uint32_t w0 = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; w0 < words;
       w0 += 4 * warps) {
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint64_t w = w0 + static_cast<uint64_t>(j) * warps;
      const uint64_t i = w * 32 + lane;
      v[j] = (w < words && i < n) ? x[i] : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint64_t w = w0 + static_cast<uint64_t>(j) * warps;
      if (w >= words) break;  // uniform across the warp
      const uint32_t i = static_cast<uint32_t>(w * 32 + lane);
      const bool valid = i < n;
      const uint32_t key = KeyOf(v[j]);
      const uint32_t digit = key >> kDigit1Shift;
      const uint32_t above = __ballot_sync(0xFFFFFFFFu, valid && digit > bin);
      const uint32_t in_bin = __ballot_sync(0xFFFFFFFFu, valid && digit == bin);
      if (lane == 0) {
        above_bits[w] = above;
        tie_bits[w] = 0;
      }
      if (in_bin != 0) {
        uint32_t base = 0;
        if (lane == 0) base = atomicAdd(&state[kNumCandidates], __popc(in_bin));
        base = __shfl_sync(0xFFFFFFFFu, base, 0);
        if ((in_bin >> lane) & 1u) {
          candidates[base + __popc(in_bin & ((1u << lane) - 1))] = i;
          const uint32_t rest = key & kRestMask;
          atomicAdd(&state[kCoarse2 + (rest >> kFineBits)], 1u);
          atomicAdd(&state[kFine2 + rest], 1u);
        }
      }
    }
  }
}

// The exact k-th key T and how many keys equal to it are kept.
__global__ void __launch_bounds__(kPickThreads) PickThresholdKernel(uint32_t* state) {
  __shared__ uint32_t coarse, need_in_coarse, fine, ties_to_keep;
  FindBinOfRank<1>(state + kCoarse2, kCoarseBins, state[kNeedInBin], &coarse, &need_in_coarse);
  __syncthreads();
  FindBinOfRank<1>(state + kFine2 + coarse * kFineBins, kFineBins, need_in_coarse, &fine,
                   &ties_to_keep);
  __syncthreads();
  if (threadIdx.x == 0) {
    state[kThreshold] = (state[kBin] << kDigit1Shift) | (coarse << kFineBits) | fine;
    state[kTiesToKeep] = ties_to_keep;
  }
}

// Marks the candidates above T and those equal to T.
__global__ void __launch_bounds__(kPassThreads)
    MarkCandidatesKernel(const float* x, const uint32_t* state, const uint32_t* candidates,
                         uint32_t* above_bits, uint32_t* tie_bits) {
  const uint32_t count = state[kNumCandidates];
  const uint32_t threshold = state[kThreshold];
  for (uint32_t c = blockIdx.x * blockDim.x + threadIdx.x; c < count;
       c += gridDim.x * blockDim.x) {
    const uint32_t i = candidates[c];
    const uint32_t key = KeyOf(x[i]);
    if (key > threshold) {
      atomicOr(&above_bits[i / 32], 1u << (i % 32));
    } else if (key == threshold) {
      atomicOr(&tie_bits[i / 32], 1u << (i % 32));
    }
  }
}

// Ordered compaction, step 1: per block, (marked above << 32) | ties.
__global__ void __launch_bounds__(kCompactThreads)
    CountMarksKernel(const uint32_t* above_bits, const uint32_t* tie_bits, uint32_t words,
                     uint64_t* block_counts) {
  using Scan = cub::BlockScan<uint64_t, kCompactThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  uint64_t mine = 0;
  const uint64_t first = blockIdx.x * kWordsPerCompactBlock + threadIdx.x * kWordsPerThread;
#pragma unroll
  for (int j = 0; j < kWordsPerThread; ++j) {
    if (first + j < words) {
      mine += (static_cast<uint64_t>(__popc(above_bits[first + j])) << 32) +
              __popc(tie_bits[first + j]);
    }
  }
  uint64_t total = 0;
  Scan(scan_storage).InclusiveSum(mine, mine, total);
  if (threadIdx.x == 0) block_counts[blockIdx.x] = total;
}

// Step 2: exclusive prefix sums of the block counts (one block, in place).
__global__ void __launch_bounds__(kPickThreads) ScanBlockCountsKernel(uint64_t* block_counts,
                                                                      uint32_t blocks) {
  using Scan = cub::BlockScan<uint64_t, kPickThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ uint64_t carry;
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (uint32_t base = 0; base < blocks; base += kPickThreads) {
    const uint32_t b = base + threadIdx.x;
    const uint64_t mine = b < blocks ? block_counts[b] : 0;
    uint64_t before = 0;
    uint64_t total = 0;
    Scan(scan_storage).ExclusiveSum(mine, before, total);
    if (b < blocks) block_counts[b] = carry + before;
    __syncthreads();
    if (threadIdx.x == 0) carry += total;
    __syncthreads();
  }
}

// Step 3: every marked index, in ascending order; the i-th tie (in index
// order) is kept while i < ties_to_keep. An index's output position is the
// number of kept indices before it.
__global__ void __launch_bounds__(kCompactThreads)
    WriteSelectedKernel(const float* x, const uint32_t* above_bits, const uint32_t* tie_bits,
                        uint32_t words, const uint64_t* block_counts, const uint32_t* state,
                        uint32_t* indices, float* values) {
  using Scan = cub::BlockScan<uint64_t, kCompactThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  const uint32_t ties_to_keep = state[kTiesToKeep];
  const uint64_t first = blockIdx.x * kWordsPerCompactBlock + threadIdx.x * kWordsPerThread;
  uint32_t above[kWordsPerThread];
  uint32_t ties[kWordsPerThread];
  uint64_t mine = 0;
#pragma unroll
  for (int j = 0; j < kWordsPerThread; ++j) {
    const bool valid = first + j < words;
    above[j] = valid ? above_bits[first + j] : 0;
    ties[j] = valid ? tie_bits[first + j] : 0;
    mine += (static_cast<uint64_t>(__popc(above[j])) << 32) + __popc(ties[j]);
  }
  uint64_t before = 0;
  Scan(scan_storage).ExclusiveSum(mine, before);
  before += block_counts[blockIdx.x];
  uint32_t above_before = static_cast<uint32_t>(before >> 32);
  uint32_t ties_before = static_cast<uint32_t>(before);
#pragma unroll
  for (int j = 0; j < kWordsPerThread; ++j) {
    uint32_t marked = above[j] | ties[j];
    while (marked != 0) {
      const uint32_t bit = __ffs(marked) - 1;
      marked &= marked - 1;
      const uint32_t i = static_cast<uint32_t>((first + j) * 32 + bit);
      const bool is_tie = (ties[j] >> bit) & 1u;
      if (!is_tie || ties_before < ties_to_keep) {
        const uint32_t at = above_before + min(ties_before, ties_to_keep);
        indices[at] = i;
        values[at] = x[i];
      }
      if (is_tie) {
        ++ties_before;
      } else {
        ++above_before;
      }
    }
  }
}

// k >= n: every index, in order.
__global__ void SelectAllKernel(const float* x, uint32_t n, uint32_t* indices, float* values) {
  for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    indices[i] = i;
    values[i] = x[i];
  }
}

__global__ void EstimateAllKernel(SketchHashParams sketch, const float* table, uint32_t n,
                                  float* estimates) {
  for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    estimates[i] = EstimateOf(sketch, table, i);
  }
}

struct WorkspaceView {
  uint32_t* state;
  uint32_t* candidates;
  uint32_t* above_bits;
  uint32_t* tie_bits;
  uint64_t* block_counts;
};

absl::Status CheckSelection(uint64_t n, const TopKWorkspace& workspace) {
  if (n >= (1ull << 32)) {
    return absl::InvalidArgumentError(absl::StrCat("top-k over ", n, " elements: at most 2^32 - 1"));
  }
  if (n > workspace.capacity()) {
    return absl::InvalidArgumentError(absl::StrCat("top-k over ", n,
                                                   " elements with a workspace for ",
                                                   workspace.capacity()));
  }
  return absl::OkStatus();
}

// Stage 1's pick, stages 2 and 3 over x, whose first-digit histogram is
// already in the state.
absl::Status SelectAfterHistogram(const float* x, uint32_t n, uint32_t k,
                                  const WorkspaceView& w, uint32_t* indices, float* values,
                                  cudaStream_t stream) {
  const uint32_t words = (n + 31) / 32;
  PickBinKernel<<<1, kPickThreads, 0, stream>>>(k, w.state);
  GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the top-k bin pick");
  PartitionKernel<<<PersistentBlocks(kPassThreads, uint64_t{words} * 32 / 4), kPassThreads, 0,
                    stream>>>(x, n, w.state, w.candidates, w.above_bits, w.tie_bits);
  GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the top-k partition");
  PickThresholdKernel<<<1, kPickThreads, 0, stream>>>(w.state);
  GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the top-k threshold pick");
  MarkCandidatesKernel<<<PersistentBlocks(kPassThreads, n), kPassThreads, 0, stream>>>(
      x, w.state, w.candidates, w.above_bits, w.tie_bits);
  GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the top-k candidate marking");
  const unsigned blocks = static_cast<unsigned>(BlocksToCover(words, kWordsPerCompactBlock));
  CountMarksKernel<<<blocks, kCompactThreads, 0, stream>>>(w.above_bits, w.tie_bits, words,
                                                           w.block_counts);
  GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the top-k mark count");
  ScanBlockCountsKernel<<<1, kPickThreads, 0, stream>>>(w.block_counts, blocks);
  GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the top-k count scan");
  WriteSelectedKernel<<<blocks, kCompactThreads, 0, stream>>>(
      x, w.above_bits, w.tie_bits, words, w.block_counts, w.state, indices, values);
  GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the top-k output");
  return absl::OkStatus();
}

// The whole selection of the k <= n entries ranking first: of x, or, with
// kFromSketch, of the sketch's estimates, which are written to `estimates`
// on the way and selected from there.
template <bool kFromSketch>
absl::Status Select(const float* x, const SketchHashParams& sketch, const float* table,
                    uint32_t n, uint64_t k, const WorkspaceView& w, float* estimates,
                    uint32_t* indices, float* values, cudaStream_t stream) {
  if (k == 0) return absl::OkStatus();
  const float* keys = kFromSketch ? estimates : x;
  if (k == n) {
    if (kFromSketch) {
      EstimateAllKernel<<<PersistentBlocks(kPassThreads, n), kPassThreads, 0, stream>>>(
          sketch, table, n, estimates);
      GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the sketch estimate");
    }
    SelectAllKernel<<<PersistentBlocks(kPassThreads, n), kPassThreads, 0, stream>>>(
        keys, n, indices, values);
    GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the top-k copy");
    return absl::OkStatus();
  }
  GPU_RETURN_IF_ERROR(cudaMemsetAsync(w.state, 0, kStateWords * sizeof(uint32_t), stream),
                      "clearing the top-k histograms");
  if (kFromSketch && UseStagedEstimates(sketch)) {
    SketchHistogramWideKernel<1>
        <<<PersistentBlocks(kChunkThreads, uint64_t{WideChunks(n)} * kChunkThreads), kChunkThreads,
           0, stream>>>(
            sketch, table, n, estimates, w.state);
  } else {
    HistogramKernel<kFromSketch>
        <<<PersistentBlocks(kPassThreads, n / 4), kPassThreads, 0, stream>>>(x, sketch, table, n,
                                                                             estimates, w.state);
  }
  GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the top-k histogram");
  return SelectAfterHistogram(keys, n, static_cast<uint32_t>(k), w, indices, values, stream);
}

}  // namespace

absl::StatusOr<TopKWorkspace> TopKWorkspace::Create(uint64_t capacity, bool for_sketches) {
  if (capacity >= (1ull << 32)) {
    return absl::InvalidArgumentError(
        absl::StrCat("top-k workspace for ", capacity, " elements: at most 2^32 - 1"));
  }
  TopKWorkspace workspace;
  workspace.capacity_ = capacity;
  const uint64_t words = (capacity + 31) / 32;
  absl::StatusOr<DeviceBuffer<uint32_t>> state = DeviceBuffer<uint32_t>::Allocate(kStateWords);
  if (!state.ok()) return state.status();
  workspace.state_ = *std::move(state);
  absl::StatusOr<DeviceBuffer<uint32_t>> candidates = DeviceBuffer<uint32_t>::Allocate(capacity);
  if (!candidates.ok()) return candidates.status();
  workspace.candidates_ = *std::move(candidates);
  absl::StatusOr<DeviceBuffer<uint32_t>> above = DeviceBuffer<uint32_t>::Allocate(words);
  if (!above.ok()) return above.status();
  workspace.above_bits_ = *std::move(above);
  absl::StatusOr<DeviceBuffer<uint32_t>> ties = DeviceBuffer<uint32_t>::Allocate(words);
  if (!ties.ok()) return ties.status();
  workspace.tie_bits_ = *std::move(ties);
  absl::StatusOr<DeviceBuffer<uint64_t>> counts =
      DeviceBuffer<uint64_t>::Allocate(BlocksToCover(words, kWordsPerCompactBlock));
  if (!counts.ok()) return counts.status();
  workspace.block_counts_ = *std::move(counts);
  if (for_sketches) {
    absl::StatusOr<DeviceBuffer<float>> estimates = DeviceBuffer<float>::Allocate(capacity);
    if (!estimates.ok()) return estimates.status();
    workspace.estimates_ = *std::move(estimates);
  }
  return workspace;
}

absl::Status LaunchTopK(const float* x, uint64_t n, uint64_t k, TopKWorkspace& workspace,
                        uint32_t* indices, float* values, cudaStream_t stream) {
  absl::Status valid = CheckSelection(n, workspace);
  if (!valid.ok()) return valid;
  const WorkspaceView w{workspace.state_.data(), workspace.candidates_.data(),
                        workspace.above_bits_.data(), workspace.tie_bits_.data(),
                        workspace.block_counts_.data()};
  return Select<false>(x, SketchHashParams{}, nullptr, static_cast<uint32_t>(n), std::min(k, n),
                       w, nullptr, indices, values, stream);
}

absl::Status LaunchSketchHeavyHitters(const SketchShape& shape, const float* table, uint64_t dim,
                                      uint64_t k, TopKWorkspace& workspace, uint32_t* indices,
                                      float* values, cudaStream_t stream) {
  absl::Status valid_shape = ValidateSketchShape(shape);
  if (!valid_shape.ok()) return valid_shape;
  absl::Status valid_size = CheckSelection(dim, workspace);
  if (!valid_size.ok()) return valid_size;
  if (dim > 0 && workspace.estimates_.size() == 0) {
    return absl::FailedPreconditionError(
        "sketch heavy hitters need a top-k workspace made for sketches");
  }
  const WorkspaceView w{workspace.state_.data(), workspace.candidates_.data(),
                        workspace.above_bits_.data(), workspace.tie_bits_.data(),
                        workspace.block_counts_.data()};
  return Select<true>(nullptr, MakeSketchHashParams(shape), table, static_cast<uint32_t>(dim),
                      std::min(k, dim), w, workspace.estimates_.data(), indices, values, stream);
}

}  // namespace sketchfuse
