// Checks shared by the algorithms' entry points (internal to this package).
#ifndef SKETCHFUSE_WORKER_DECENTRALIZED_INPUT_CHECKS_H_
#define SKETCHFUSE_WORKER_DECENTRALIZED_INPUT_CHECKS_H_

#include "absl/status/status.h"
#include "common/payload.h"
#include "worker/decentralized/algorithms.h"

namespace sketchfuse {
namespace decentralized_internal {

// INVALID_ARGUMENT unless the input has a valid payload of `kind`, and (when
// `needs_encoded`) the encoded vector of payload.dim values.
absl::Status CheckInput(const GroupInput& input, PayloadKind kind, bool needs_encoded);

// The settlement that releases and masks `released` (sparse or dense).
Settlement Release(const Update& released);

}  // namespace decentralized_internal
}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_DECENTRALIZED_INPUT_CHECKS_H_
