// Error feedback and momentum on the GPU: the state updates of
// common/error_feedback.h, for a fused group resident in device memory.
//
//   encode:   u = m * u + g  (when a velocity is given)      velocity u
//             e = e + u      (e = e + g without momentum)    residual e
//   applied:  e[i] = 0 and u[i] = 0 at every applied coordinate i
//   rescale:  e = f * e      (the residual in units of a new learning rate)
//
// Together they keep the residual equal to exactly what was not applied. The
// products and sums are rounded separately (no fused multiply-add), as the
// CPU decorators compute them. Launchers enqueue on `stream` and return
// without synchronizing.
#ifndef SKETCHFUSE_CUDA_ERROR_FEEDBACK_KERNELS_H_
#define SKETCHFUSE_CUDA_ERROR_FEEDBACK_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace sketchfuse {

// The encode-side update over n elements. `velocity` may be null (no
// momentum; `momentum` is then ignored); momentum must be in [0, 1).
absl::Status LaunchErrorFeedbackAccumulate(const float* grad, uint64_t n, float momentum,
                                           float* velocity, float* residual,
                                           cudaStream_t stream);

// Zeroes residual (and velocity, when not null) at indices[0, count), each
// < n. Out-of-range indices are skipped; the update's indices are validated
// on the host before it is applied (common/error_feedback.h ValidateUpdate).
absl::Status LaunchClearApplied(const uint32_t* indices, uint64_t count, uint64_t n,
                                float* residual, float* velocity, cudaStream_t stream);

// A capped release at indices[0, count) (each < n): residual[i] = 0 +
// kept * residual[i] (the host stack's release, then its add-back of the
// unsent fraction, each rounded as there), and velocity[i] = 0 when velocity
// is not null. Out-of-range indices are skipped.
absl::Status LaunchKeepApplied(const uint32_t* indices, uint64_t count, uint64_t n, float kept, float* residual,
                               float* velocity, cudaStream_t stream);

// x[i] = factor * x[i] for i < n (one rounding, as the host's loop): the
// residual kept in units of the current learning rate when the rate changes
// (common/error_feedback.h ErrorFeedback::ScaleResidual).
absl::Status LaunchScale(float* x, uint64_t n, float factor, cudaStream_t stream);

// *out = the sum of x[i]^2 over i < n, in double (the order of the additions
// is the device's: within a few units in the last place of the host's
// sequential sum). `out` is device memory.
absl::Status LaunchSquaredNorm(const float* x, uint64_t n, double* out, cudaStream_t stream);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_CUDA_ERROR_FEEDBACK_KERNELS_H_
