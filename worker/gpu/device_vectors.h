// What a training front end does with gradients in device memory around an
// exchange (the PyTorch hook's device path, worker/hook/hook_session.h):
// choose the GPU, look for a non-finite element, and write a sparse update
// into a dense device vector. Declared for builds without the CUDA toolkit
// too, where every function returns FAILED_PRECONDITION saying so
// (device_vectors_unavailable.cc).
//
// Each function completes its device work before it returns.
#ifndef SKETCHFUSE_WORKER_GPU_DEVICE_VECTORS_H_
#define SKETCHFUSE_WORKER_GPU_DEVICE_VECTORS_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/core/gradient_view.h"

namespace sketchfuse {

// Makes GPU `index` the calling thread's device (where the group states of
// worker/gpu/device_group_state.h allocate and launch). INVALID_ARGUMENT
// for an index the process cannot see; FAILED_PRECONDITION without a GPU.
absl::Status UseGpu(int index);

// The index of the first NaN or infinity of `values` (device memory), or
// none. INVALID_ARGUMENT for a host view.
absl::StatusOr<std::optional<size_t>> FirstNonFiniteOnDevice(GradientView values);

// out[0, n) (device memory) = 0, then out[indices[j]] = values[j] (host
// spans of the same length; indices distinct and < n, else
// INVALID_ARGUMENT before anything is written).
absl::Status WriteSparseOnDevice(absl::Span<const uint32_t> indices, absl::Span<const float> values, float* out,
                                 size_t n);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_GPU_DEVICE_VECTORS_H_
