// Device-side Count-Sketch helpers shared by the kernels of cuda/ (include
// only from .cu files). The row hashes are computed once on the host and
// passed by value as a kernel parameter.
#ifndef SKETCHFUSE_CUDA_COUNT_SKETCH_DEVICE_CU_H_
#define SKETCHFUSE_CUDA_COUNT_SKETCH_DEVICE_CU_H_

#include <cstdint>

#include "common/count_sketch.h"
#include "common/sketch_hash.h"

namespace sketchfuse {

// A sketch's shape with every row's hash precomputed (2 KB: a kernel parameter).
struct SketchHashParams {
  uint32_t rows;
  uint32_t cols;
  uint32_t chunk_shift;  // ChunkShift(cols)
  RowHash row[kMaxSketchRows];
};

// Coordinate i's hash inputs shared by every row: the Fmix32 of its index
// (for the sign) and of its chunk (for the offset), and its position in the
// chunk. Mixing once per coordinate instead of once per row.
struct CoordinateKeys {
  uint32_t mixed_index;
  uint32_t mixed_chunk;
  uint32_t position;
};

__device__ __forceinline__ CoordinateKeys KeysOf(const SketchHashParams& p, uint32_t i) {
  return CoordinateKeys{Fmix32(i), Fmix32(i >> p.chunk_shift),
                        i & ((1u << p.chunk_shift) - 1)};
}

// Coordinate i's cell in row r (bucket_r(i) of common/sketch_hash.h).
__device__ __forceinline__ uint32_t CellOf(const SketchHashParams& p, uint32_t r,
                                           const CoordinateKeys& keys) {
  const uint32_t offset = BucketOf(HashMixed(p.row[r].offset, keys.mixed_chunk), p.cols);
  return CellAfter(offset, keys.position, p.cols);
}

// Coordinate i's sign in row r, +1.0f or -1.0f.
__device__ __forceinline__ float SignIn(const SketchHashParams& p, uint32_t r,
                                        const CoordinateKeys& keys) {
  return SignOf(HashMixed(p.row[r].sign, keys.mixed_index));
}

// The shape must be valid (ValidateSketchShape).
inline SketchHashParams MakeSketchHashParams(const SketchShape& shape) {
  SketchHashParams params{};
  params.rows = shape.rows;
  params.cols = shape.cols;
  params.chunk_shift = ChunkShift(shape.cols);
  for (uint32_t r = 0; r < shape.rows; ++r) params.row[r] = MakeRowHash(shape.seed, r);
  return params;
}

// Sorts v by a stable compare-exchange network with constant indices (so the
// values stay in registers) and returns the median: for an even count the
// mean of the two middle values, the CPU's final operation.
template <int kRows>
__device__ __forceinline__ float MedianOfFixed(float (&v)[kRows]) {
#pragma unroll
  for (int pass = 0; pass < kRows; ++pass) {
#pragma unroll
    for (int j = 0; j + 1 < kRows - pass; ++j) {
      if (v[j] > v[j + 1]) {
        const float t = v[j];
        v[j] = v[j + 1];
        v[j + 1] = t;
      }
    }
  }
  return (kRows % 2 == 1) ? v[kRows / 2] : (v[kRows / 2 - 1] + v[kRows / 2]) * 0.5f;
}

// Estimate of coordinate i for a sketch of exactly kRows rows: the rows'
// cells (consecutive across a warp's consecutive coordinates, so the loads
// coalesce) are gathered first (independent loads in flight), then their
// median taken in registers.
template <int kRows>
__device__ __forceinline__ float EstimateOfFixedRows(const SketchHashParams& p,
                                                     const float* table, uint32_t i) {
  const CoordinateKeys keys = KeysOf(p, i);
  float v[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    v[r] = SignIn(p, r, keys) * __ldg(table + static_cast<size_t>(r) * p.cols + CellOf(p, r, keys));
  }
  return MedianOfFixed<kRows>(v);
}

// Any number of rows (an array in local memory).
__device__ __forceinline__ float EstimateOfAnyRows(const SketchHashParams& p, const float* table,
                                                   uint32_t i) {
  const CoordinateKeys keys = KeysOf(p, i);
  float v[kMaxSketchRows];
  for (uint32_t r = 0; r < p.rows; ++r) {
    const float value =
        SignIn(p, r, keys) * __ldg(table + static_cast<size_t>(r) * p.cols + CellOf(p, r, keys));
    uint32_t j = r;  // insertion sort while gathering
    while (j > 0 && v[j - 1] > value) {
      v[j] = v[j - 1];
      --j;
    }
    v[j] = value;
  }
  return (p.rows % 2 == 1) ? v[p.rows / 2] : (v[p.rows / 2 - 1] + v[p.rows / 2]) * 0.5f;
}

// Estimate of coordinate i: the median over rows of sign * cell, for an even
// number of rows the mean of the two middle values. Both sorts are stable and
// compare with `>`, and the final operation is the CPU's, so the result is
// bit-identical to SketchView's for the same table.
__device__ __forceinline__ float EstimateOf(const SketchHashParams& p, const float* table,
                                            uint32_t i) {
  switch (p.rows) {
    case 1: return EstimateOfFixedRows<1>(p, table, i);
    case 3: return EstimateOfFixedRows<3>(p, table, i);
    case 4: return EstimateOfFixedRows<4>(p, table, i);
    case 5: return EstimateOfFixedRows<5>(p, table, i);
    case 7: return EstimateOfFixedRows<7>(p, table, i);
    default: return EstimateOfAnyRows(p, table, i);
  }
}

// ---------------------------------------------------------------------------
// Wide sketches (cols >= kMaxChunkLength, so every chunk is kMaxChunkLength
// long): block-cooperative helpers that handle one chunk at a time with a
// block of kChunkThreads threads. A chunk's cells in a row are one run (two
// where it wraps around the row's end), so its table traffic can be 16-byte
// vector operations on aligned groups of four cells, staged through shared
// memory, instead of one 4-byte operation per coordinate.

inline constexpr int kChunkThreads = 256;
inline constexpr int kChunkPerThread = kMaxChunkLength / kChunkThreads;

__host__ __device__ inline bool IsWide(const SketchHashParams& p) {
  return p.chunk_shift == kMaxChunkShift;
}

// Number of chunks of a wide sketch's n coordinates (the last may be short).
__host__ __device__ inline uint32_t WideChunks(uint32_t n) {
  return static_cast<uint32_t>((uint64_t{n} + kMaxChunkLength - 1) >> kMaxChunkShift);
}

// Whether estimates take the staged, chunk-at-a-time path: wide sketches of
// one row. With more rows, one thread's independent per-row loads keep more
// requests in flight than a block that stages every row before computing:
// on the H100, a 5-row GPT-2 heavy-hitter pass took 1.754 ms staged against
// 1.542 ms per coordinate, while one row went from 0.791 to 0.629 ms.
__host__ __device__ inline bool UseStagedEstimates(const SketchHashParams& p) {
  return IsWide(p) && p.rows == 1;
}

// The split of a run of `len` cells starting at `cells` into a head of
// scalar cells up to the first 16-byte boundary, whole aligned groups of
// four, and a scalar tail.
struct AlignedSplit {
  uint32_t head;
  uint32_t groups;
  uint32_t tail_first;
};

__device__ __forceinline__ AlignedSplit SplitAligned(const float* cells, uint32_t len) {
  const uint32_t misaligned = (reinterpret_cast<uintptr_t>(cells) >> 2) & 3u;
  const uint32_t head = min(len, (4u - misaligned) & 3u);
  const uint32_t groups = (len - head) >> 2;
  return AlignedSplit{head, groups, head + (groups << 2)};
}

// Block-cooperative: staged[q] = cells[q] for q < len, with 16-byte loads for
// the aligned groups. Reads no cell outside [cells, cells + len).
__device__ __forceinline__ void StageCells(const float* cells, uint32_t len, float* staged) {
  const AlignedSplit split = SplitAligned(cells, len);
  const uint32_t t = threadIdx.x;
  if (t < split.head) staged[t] = __ldg(cells + t);
  for (uint32_t g = t; g < split.groups; g += blockDim.x) {
    const uint32_t q = split.head + (g << 2);
    const float4 v = __ldg(reinterpret_cast<const float4*>(cells + q));
    staged[q] = v.x;
    staged[q + 1] = v.y;
    staged[q + 2] = v.z;
    staged[q + 3] = v.w;
  }
  if (t < len - split.tail_first) staged[split.tail_first + t] = __ldg(cells + split.tail_first + t);
}

// Atomically adds four floats to an aligned group of cells: one 16-byte
// reduction on sm_90 and newer, four 4-byte ones before.
__device__ __forceinline__ void AtomicAddGroup(float* cells, float a, float b, float c, float d) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // A reduction (no value returned), as the scalar atomicAdds compile to.
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(__cvta_generic_to_global(cells)), "f"(a), "f"(b),
               "f"(c), "f"(d)
               : "memory");
#else
  atomicAdd(cells, a);
  atomicAdd(cells + 1, b);
  atomicAdd(cells + 2, c);
  atomicAdd(cells + 3, d);
#endif
}

// Block-cooperative: cells[q] += values[q] for q < len (values in shared
// memory), with 16-byte reductions for the aligned groups; zeros are skipped.
__device__ __forceinline__ void AddToCells(const float* values, uint32_t len, float* cells) {
  const AlignedSplit split = SplitAligned(cells, len);
  const uint32_t t = threadIdx.x;
  if (t < split.head && values[t] != 0.0f) atomicAdd(cells + t, values[t]);
  for (uint32_t g = t; g < split.groups; g += blockDim.x) {
    const uint32_t q = split.head + (g << 2);
    const float a = values[q], b = values[q + 1], c = values[q + 2], d = values[q + 3];
    if (a != 0.0f || b != 0.0f || c != 0.0f || d != 0.0f) AtomicAddGroup(cells + q, a, b, c, d);
  }
  const uint32_t q = split.tail_first + t;
  if (q < len && values[q] != 0.0f) atomicAdd(cells + q, values[q]);
}

// The first cell of chunk `chunk` in row r, and how many of its `len`
// coordinates come before the row's end (the rest wrap to cell 0).
struct ChunkRun {
  uint32_t offset;
  uint32_t before_wrap;
};

__device__ __forceinline__ ChunkRun RunOf(const SketchHashParams& p, uint32_t r,
                                          uint32_t mixed_chunk, uint32_t len) {
  const uint32_t offset = BucketOf(HashMixed(p.row[r].offset, mixed_chunk), p.cols);
  return ChunkRun{offset, CellsBeforeWrap(offset, len, p.cols)};
}

// Block-cooperative, wide sketches with exactly kRows rows: the estimates of
// the `len` coordinates of chunk `chunk`; thread t gets those of positions
// t + j * kChunkThreads in est[j] (j < kChunkPerThread, positions < len).
// `staged` is kRows * kMaxChunkLength floats of shared memory; the call
// synchronizes the block before and after using it.
template <int kRows>
__device__ __forceinline__ void EstimateChunk(const SketchHashParams& p, const float* table,
                                              uint32_t chunk, uint32_t len, float* staged,
                                              float (&est)[kChunkPerThread]) {
  const uint32_t mixed_chunk = Fmix32(chunk);
  __syncthreads();  // the previous chunk's readers are done with `staged`
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const ChunkRun run = RunOf(p, r, mixed_chunk, len);
    const float* row = table + static_cast<size_t>(r) * p.cols;
    StageCells(row + run.offset, run.before_wrap, staged + r * kMaxChunkLength);
    if (run.before_wrap < len) {
      StageCells(row, len - run.before_wrap, staged + r * kMaxChunkLength + run.before_wrap);
    }
  }
  __syncthreads();
  const uint32_t first = chunk << kMaxChunkShift;
#pragma unroll
  for (int j = 0; j < kChunkPerThread; ++j) {
    const uint32_t q = threadIdx.x + j * kChunkThreads;
    if (q >= len) break;
    const uint32_t mixed_index = Fmix32(first + q);
    float v[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      v[r] = SignOf(HashMixed(p.row[r].sign, mixed_index)) * staged[r * kMaxChunkLength + q];
    }
    est[j] = MedianOfFixed<kRows>(v);
  }
}

// Block-cooperative, wide sketches with exactly kRows rows: calls
// fn(i, estimate) for every coordinate i < n of this block's chunks (a
// grid-stride loop over chunks), the estimates coming from EstimateChunk.
// `staged` as for EstimateChunk.
template <int kRows, typename Fn>
__device__ __forceinline__ void ForEachStagedEstimate(const SketchHashParams& p,
                                                      const float* table, uint32_t n,
                                                      float* staged, Fn&& fn) {
  const uint32_t chunks = WideChunks(n);
  for (uint32_t chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
    const uint32_t first = chunk << kMaxChunkShift;
    const uint32_t len = min(kMaxChunkLength, n - first);
    float est[kChunkPerThread];
    EstimateChunk<kRows>(p, table, chunk, len, staged, est);
#pragma unroll
    for (int j = 0; j < kChunkPerThread; ++j) {
      const uint32_t q = threadIdx.x + j * kChunkThreads;
      if (q < len) fn(first + q, est[j]);
    }
  }
}

}  // namespace sketchfuse

#endif  // SKETCHFUSE_CUDA_COUNT_SKETCH_DEVICE_CU_H_
