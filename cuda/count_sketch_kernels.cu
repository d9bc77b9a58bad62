// Count-Sketch kernels. One thread per coordinate (grid-stride loops), rows
// unrolled inside the thread so the coordinate is read once.
#include "cuda/count_sketch_kernels.h"

#include "absl/strings/str_cat.h"
#include "common/sketch_hash.h"
#include "cuda/cuda_check.h"

namespace sketchfuse {
namespace {

constexpr int kThreads = 256;

int BlocksFor(uint32_t n) {
  const uint32_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535u * 8 ? (blocks == 0 ? 1 : blocks) : 65535u * 8);
}

__global__ void SketchHashesKernel(RowHash hash, uint32_t cols, uint32_t n, uint32_t* buckets,
                                   float* signs) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const uint32_t bits = HashBits(hash, i);
    buckets[i] = BucketOf(bits, cols);
    signs[i] = SignOf(bits);
  }
}

__global__ void InsertKernel(uint64_t seed, uint32_t rows, uint32_t cols, const float* x,
                             uint32_t n, float* table) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float value = x[i];
    if (value == 0.0f) continue;
    for (uint32_t r = 0; r < rows; ++r) {
      const uint32_t bits = HashBits(MakeRowHash(seed, r), i);
      atomicAdd(table + static_cast<size_t>(r) * cols + BucketOf(bits, cols), SignOf(bits) * value);
    }
  }
}

__global__ void EstimateKernel(uint64_t seed, uint32_t rows, uint32_t cols, const float* table,
                               uint32_t n, float* out) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float v[kMaxSketchRows];
    for (uint32_t r = 0; r < rows; ++r) {
      const uint32_t bits = HashBits(MakeRowHash(seed, r), i);
      const float cell = table[static_cast<size_t>(r) * cols + BucketOf(bits, cols)];
      // Insertion sort while gathering (rows is small).
      float value = SignOf(bits) * cell;
      uint32_t j = r;
      while (j > 0 && v[j - 1] > value) {
        v[j] = v[j - 1];
        --j;
      }
      v[j] = value;
    }
    out[i] = (rows % 2 == 1) ? v[rows / 2] : (v[rows / 2 - 1] + v[rows / 2]) * 0.5f;
  }
}

}  // namespace

absl::Status LaunchSketchHashes(const SketchShape& shape, uint32_t row, uint32_t n,
                                uint32_t* buckets, float* signs, cudaStream_t stream) {
  absl::Status valid = ValidateSketchShape(shape);
  if (!valid.ok()) return valid;
  if (row >= shape.rows) {
    return absl::InvalidArgumentError(absl::StrCat("row ", row, " of a ", shape.rows, "-row sketch"));
  }
  if (n == 0) return absl::OkStatus();
  SketchHashesKernel<<<BlocksFor(n), kThreads, 0, stream>>>(MakeRowHash(shape.seed, row),
                                                             shape.cols, n, buckets, signs);
  CUDA_RETURN_IF_ERROR(cudaGetLastError(), "launching the sketch hash kernel");
  return absl::OkStatus();
}

absl::Status LaunchCountSketchInsert(const SketchShape& shape, const float* x, uint32_t n,
                                     float* table, cudaStream_t stream) {
  absl::Status valid = ValidateSketchShape(shape);
  if (!valid.ok()) return valid;
  if (n == 0) return absl::OkStatus();
  InsertKernel<<<BlocksFor(n), kThreads, 0, stream>>>(shape.seed, shape.rows, shape.cols, x, n,
                                                       table);
  CUDA_RETURN_IF_ERROR(cudaGetLastError(), "launching the sketch insert kernel");
  return absl::OkStatus();
}

absl::Status LaunchCountSketchEstimate(const SketchShape& shape, const float* table, uint32_t n,
                                       float* out, cudaStream_t stream) {
  absl::Status valid = ValidateSketchShape(shape);
  if (!valid.ok()) return valid;
  if (n == 0) return absl::OkStatus();
  EstimateKernel<<<BlocksFor(n), kThreads, 0, stream>>>(shape.seed, shape.rows, shape.cols, table,
                                                         n, out);
  CUDA_RETURN_IF_ERROR(cudaGetLastError(), "launching the sketch estimate kernel");
  return absl::OkStatus();
}

}  // namespace sketchfuse
