// device_vectors.h in a build without the CUDA toolkit: every entry point
// says so.
#include "worker/gpu/device_memory.h"
#include "worker/gpu/device_vectors.h"

namespace sketchfuse {

absl::Status UseGpu(int) { return CheckGpuWorker(); }
absl::StatusOr<std::optional<size_t>> FirstNonFiniteOnDevice(GradientView) { return CheckGpuWorker(); }
absl::Status WriteSparseOnDevice(absl::Span<const uint32_t>, absl::Span<const float>, float*, size_t) {
  return CheckGpuWorker();
}

}  // namespace sketchfuse
