#include "bench/gpu_ceilings.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/sketch_hash.h"
#include "cuda/cuda_check.h"
#include "cuda/launch_config.h"

namespace sketchfuse {
namespace {

constexpr int kThreads = 256;

// Cell of operation `op`: its run's hashed start, then its place in the run
// (runs of 2^run_shift operations; shifts, so the pattern costs few
// instructions beside its memory accesses).
__device__ __forceinline__ uint32_t CellOf(uint64_t op, uint32_t cells, uint32_t run_shift) {
  const uint64_t run = op >> run_shift;
  const uint32_t start =
      BucketOf(Fmix32(static_cast<uint32_t>(run) ^ static_cast<uint32_t>(run >> 32) * 0x9E3779B9u),
               cells);
  const uint32_t cell = start + static_cast<uint32_t>(op & ((1ull << run_shift) - 1));
  return cell >= cells ? cell % cells : cell;
}

__global__ void ReductionsKernel(float* table, uint32_t cells, uint64_t ops, uint32_t run_shift) {
  for (uint64_t op = blockIdx.x * blockDim.x + threadIdx.x; op < ops;
       op += gridDim.x * blockDim.x) {
    atomicAdd(table + CellOf(op, cells, run_shift), 1.0f);
  }
}

__global__ void LoadsKernel(const float* table, uint32_t cells, uint64_t ops, uint32_t run_shift,
                            float* sink) {
  float sum = 0.0f;
  const uint64_t thread = blockIdx.x * blockDim.x + threadIdx.x;
  for (uint64_t op = thread; op < ops; op += gridDim.x * blockDim.x) {
    sum += __ldg(table + CellOf(op, cells, run_shift));
  }
  sink[thread] = sum;
}

// log2 of run_length, or INVALID_ARGUMENT.
absl::StatusOr<uint32_t> RunShift(uint32_t cells, uint32_t run_length) {
  if (cells == 0 || run_length == 0 || (run_length & (run_length - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("hashed accesses need cells >= 1 and a power-of-two run_length; got ",
                     cells, " and ", run_length));
  }
  uint32_t shift = 0;
  while ((1u << shift) < run_length) ++shift;
  return shift;
}

}  // namespace

absl::Status LaunchHashedReductions(float* table, uint32_t cells, uint64_t ops,
                                    uint32_t run_length, cudaStream_t stream) {
  absl::StatusOr<uint32_t> run_shift = RunShift(cells, run_length);
  if (!run_shift.ok()) return run_shift.status();
  if (ops == 0) return absl::OkStatus();
  ReductionsKernel<<<PersistentBlocks(kThreads, ops), kThreads, 0, stream>>>(table, cells, ops,
                                                                             *run_shift);
  GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the hashed reductions");
  return absl::OkStatus();
}

absl::Status LaunchHashedLoads(const float* table, uint32_t cells, uint64_t ops,
                               uint32_t run_length, float* sink, cudaStream_t stream) {
  absl::StatusOr<uint32_t> run_shift = RunShift(cells, run_length);
  if (!run_shift.ok()) return run_shift.status();
  if (ops == 0) return absl::OkStatus();
  LoadsKernel<<<PersistentBlocks(kThreads, ops), kThreads, 0, stream>>>(table, cells, ops,
                                                                        *run_shift, sink);
  GPU_RETURN_IF_ERROR(cudaGetLastError(), "launching the hashed loads");
  return absl::OkStatus();
}

}  // namespace sketchfuse
