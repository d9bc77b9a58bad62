// The worker's own CollectiveScheme on given gradients, over a real Gloo
// group whose ranks are threads of this process: the reference the hook's
// tests compare the hook's aggregates with (hook_session_test in C++,
// python/tests through the hook_reference program).
#ifndef SKETCHFUSE_WORKER_HOOK_WORKER_REFERENCE_H_
#define SKETCHFUSE_WORKER_HOOK_WORKER_REFERENCE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace sketchfuse {

// `settings`: the hook's "key=value" lines (scheme, compressor, seed, ...;
// rank and world_size are set per rank here). `grads` holds
// steps x world x dim floats, indexed [step][rank][i]; `params` the group's
// parameter values (empty: none, for the schemes that do not weigh by them).
// Returns the mean updates each rank applies, indexed like `grads`: the
// worker's exchange, the sum over ranks divided by world, then OnApplied.
// The first rank's error otherwise.
absl::StatusOr<std::vector<float>> WorkerSchemeMeans(const std::string& settings, int world, int steps, size_t dim,
                                                     absl::Span<const float> grads, absl::Span<const float> params);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_HOOK_WORKER_REFERENCE_H_
