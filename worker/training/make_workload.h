// The LibTorch workload a run names (v1::RunConfig workload): a Fashion-MNIST
// classifier (worker/training/classifier_workload.h) or the character-level
// language model (worker/training/language_model_workload.h).
#ifndef SKETCHFUSE_WORKER_TRAINING_MAKE_WORKLOAD_H_
#define SKETCHFUSE_WORKER_TRAINING_MAKE_WORKLOAD_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/training/torch_workload.h"

namespace sketchfuse {

// INVALID_ARGUMENT for a workload that is neither (a synthetic profile: the
// synthetic runner trains those); each workload's own errors (its data, its
// model, its optimizer).
absl::StatusOr<std::unique_ptr<TorchWorkload>> MakeTorchWorkload(TorchWorkloadConfig config);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_TRAINING_MAKE_WORKLOAD_H_
