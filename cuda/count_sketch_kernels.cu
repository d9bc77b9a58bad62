// Count-Sketch kernels: persistent grids with grid-stride loops; a coordinate
// is read once and hashed for every row inside its thread.
#include "cuda/count_sketch_kernels.h"

#include <cooperative_groups.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/sketch_hash.h"
#include "cuda/count_sketch_device.cu.h"
#include "cuda/cuda_check.h"
#include "cuda/launch_config.h"

namespace sketchfuse {
namespace {

constexpr int kThreads = 256;

__global__ void SketchHashesKernel(RowHash hash, uint32_t cols, uint32_t n, uint32_t* buckets,
                                   float* signs) {
  for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const uint32_t bits = HashBits(hash, i);
    buckets[i] = BucketOf(bits, cols);
    signs[i] = SignOf(bits);
  }
}

// Four coordinates per thread and iteration, loaded before their atomics are
// issued, so that loads and reductions overlap. The additions compile to
// fire-and-forget reductions (RED) in L2.
__global__ void InsertKernel(SketchHashParams sketch, uint32_t row_begin, uint32_t row_end,
                             const float* x, uint32_t n, float* table) {
  const uint32_t stride = gridDim.x * blockDim.x;
  for (uint64_t base = blockIdx.x * blockDim.x + threadIdx.x; base < n; base += 4 * stride) {
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint64_t i = base + static_cast<uint64_t>(j) * stride;
      v[j] = i < n ? x[i] : 0.0f;
    }
    for (uint32_t r = row_begin; r < row_end; ++r) {
      float* row = table + static_cast<size_t>(r) * sketch.cols;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (v[j] == 0.0f) continue;  // also skips indices past n
        const uint32_t bits = HashBits(sketch.row[r], static_cast<uint32_t>(base + j * stride));
        atomicAdd(row + BucketOf(bits, sketch.cols), SignOf(bits) * v[j]);
      }
    }
  }
}

// One row: each block of a cluster owns `slice` consecutive columns of a
// private copy of the row in its shared memory; any block adds into any slice
// through distributed shared memory. At the end each block adds its slice
// into the row in global memory (once per cluster, coalesced).
constexpr int kClusterThreads = 1024;
constexpr uint32_t kMaxClusterBlocks = 16;
constexpr uint32_t kMaxSliceFloats = 56 * 1024;  // 224 KiB of the 227 KiB a block may have

__global__ void __launch_bounds__(kClusterThreads)
    ClusterInsertKernel(RowHash hash, uint32_t cols, uint32_t slice, const float* x, uint32_t n,
                        float* row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  extern __shared__ float private_slice[];
  cg::cluster_group cluster = cg::this_cluster();
  for (uint32_t j = threadIdx.x; j < slice; j += blockDim.x) private_slice[j] = 0.0f;
  cluster.sync();
  const uint32_t stride = gridDim.x * blockDim.x;
  for (uint64_t base = blockIdx.x * blockDim.x + threadIdx.x; base < n; base += 4 * stride) {
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint64_t i = base + static_cast<uint64_t>(j) * stride;
      v[j] = i < n ? x[i] : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (v[j] == 0.0f) continue;
      const uint32_t bits = HashBits(hash, static_cast<uint32_t>(base + j * stride));
      const uint32_t bucket = BucketOf(bits, cols);
      const uint32_t owner = bucket / slice;
      float* target = cluster.map_shared_rank(private_slice, owner);
      atomicAdd(target + (bucket - owner * slice), SignOf(bits) * v[j]);
    }
  }
  cluster.sync();
  const uint32_t first = cluster.block_rank() * slice;
  for (uint32_t j = threadIdx.x; j < slice && first + j < cols; j += blockDim.x) {
    const float sum = private_slice[j];
    if (sum != 0.0f) atomicAdd(row + first + j, sum);
  }
#endif
}

absl::Status LaunchClusterInsert(const SketchShape& shape, const float* x, uint32_t n,
                                 float* table, uint32_t cluster_blocks, cudaStream_t stream) {
  const uint32_t slice = (shape.cols + cluster_blocks - 1) / cluster_blocks;
  const size_t smem = size_t{slice} * sizeof(float);
  GPU_RETURN_IF_ERROR(cudaFuncSetAttribute(ClusterInsertKernel,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem)),
                      "raising the cluster insert's shared memory");
  if (cluster_blocks > 8) {
    GPU_RETURN_IF_ERROR(cudaFuncSetAttribute(ClusterInsertKernel,
                                             cudaFuncAttributeNonPortableClusterSizeAllowed, 1),
                        "allowing clusters of 16 blocks");
  }
  cudaLaunchAttribute attribute;
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = cluster_blocks;
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  cudaLaunchConfig_t config = {};
  config.blockDim = dim3(kClusterThreads);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  config.gridDim = dim3(cluster_blocks);
  int clusters = 0;
  GPU_RETURN_IF_ERROR(cudaOccupancyMaxActiveClusters(&clusters, ClusterInsertKernel, &config),
                      "sizing the cluster insert's grid");
  if (clusters < 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no cluster of ", cluster_blocks, " blocks with ", smem, " bytes each fits this GPU"));
  }
  config.gridDim = dim3(static_cast<unsigned>(clusters) * cluster_blocks);
  for (uint32_t r = 0; r < shape.rows; ++r) {
    GPU_RETURN_IF_ERROR(
        cudaLaunchKernelEx(&config, ClusterInsertKernel, MakeRowHash(shape.seed, r), shape.cols,
                           slice, x, n, table + size_t{r} * shape.cols),
        "launching the cluster insert kernel");
  }
  return absl::OkStatus();
}

// The smallest power-of-two cluster whose blocks hold one row, or 0 when the
// device has no clusters (before sm_90) or the row is too long.
uint32_t ClusterBlocksFor(const SketchShape& shape) {
  int device = 0;
  int major = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  if (major < 9) return 0;
  for (uint32_t blocks = 1; blocks <= kMaxClusterBlocks; blocks *= 2) {
    if ((shape.cols + blocks - 1) / blocks <= kMaxSliceFloats) return blocks;
  }
  return 0;
}

__global__ void EstimateKernel(SketchHashParams sketch, const float* table, uint32_t n,
                               float* out) {
  for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    out[i] = EstimateOf(sketch, table, i);
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
  SketchHashesKernel<<<PersistentBlocks(kThreads, n), kThreads, 0, stream>>>(MakeRowHash(shape.seed, row),
                                                             shape.cols, n, buckets, signs);
  GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the sketch hash kernel");
  return absl::OkStatus();
}

absl::Status LaunchCountSketchInsert(const SketchShape& shape, const float* x, uint32_t n,
                                     float* table, cudaStream_t stream, InsertStrategy strategy) {
  absl::Status valid = ValidateSketchShape(shape);
  if (!valid.ok()) return valid;
  if (n == 0) return absl::OkStatus();
  if (strategy != InsertStrategy::kGlobalReductions) {
    const uint32_t cluster_blocks = ClusterBlocksFor(shape);
    if (cluster_blocks > 0) return LaunchClusterInsert(shape, x, n, table, cluster_blocks, stream);
    if (strategy == InsertStrategy::kClusterSharedMemory) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the cluster insert needs an sm_90 GPU and rows of at most ",
          kMaxClusterBlocks * kMaxSliceFloats, " columns; this row has ", shape.cols));
    }
  }
  // All rows in one pass while the table fits in half the L2 cache, where the
  // reductions are resolved; otherwise as many rows per pass as fit, reading
  // x once per pass (GPT-2 sized tables measured 2x faster this way).
  int device = 0;
  int l2_bytes = 0;
  GPU_RETURN_IF_ERROR(cudaGetDevice(&device), "finding the current device");
  GPU_RETURN_IF_ERROR(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device),
                      "reading the L2 cache size");
  const uint64_t row_bytes = uint64_t{shape.cols} * sizeof(float);
  const uint32_t rows_per_pass = static_cast<uint32_t>(
      std::max<uint64_t>(1, std::min<uint64_t>(shape.rows, (l2_bytes / 2) / row_bytes)));
  const SketchHashParams params = MakeSketchHashParams(shape);
  for (uint32_t r = 0; r < shape.rows; r += rows_per_pass) {
    InsertKernel<<<PersistentBlocks(kThreads, n / 4), kThreads, 0, stream>>>(
        params, r, std::min(shape.rows, r + rows_per_pass), x, n, table);
    GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the sketch insert kernel");
  }
  return absl::OkStatus();
}

absl::Status LaunchCountSketchEstimate(const SketchShape& shape, const float* table, uint32_t n,
                                       float* out, cudaStream_t stream) {
  absl::Status valid = ValidateSketchShape(shape);
  if (!valid.ok()) return valid;
  if (n == 0) return absl::OkStatus();
  EstimateKernel<<<PersistentBlocks(kThreads, n), kThreads, 0, stream>>>(
      MakeSketchHashParams(shape), table, n, out);
  GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the sketch estimate kernel");
  return absl::OkStatus();
}

}  // namespace sketchfuse
