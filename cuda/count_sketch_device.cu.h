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

// Estimate of coordinate i for a sketch of exactly kRows rows: the rows'
// cells (consecutive across a warp's consecutive coordinates, so the loads
// coalesce) are gathered first (independent loads in flight), then sorted by a
// stable compare-exchange network with constant indices, so the values stay
// in registers.
template <int kRows>
__device__ __forceinline__ float EstimateOfFixedRows(const SketchHashParams& p,
                                                     const float* table, uint32_t i) {
  const CoordinateKeys keys = KeysOf(p, i);
  float v[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    v[r] = SignIn(p, r, keys) * __ldg(table + static_cast<size_t>(r) * p.cols + CellOf(p, r, keys));
  }
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

}  // namespace sketchfuse

#endif  // SKETCHFUSE_CUDA_COUNT_SKETCH_DEVICE_CU_H_
