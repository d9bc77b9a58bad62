// The run's optimizer over a model's parameters (worker/training/
// optimizer_spec.h names it), and how a step's aggregated updates reach it.
#ifndef SKETCHFUSE_WORKER_TRAINING_OPTIMIZER_H_
#define SKETCHFUSE_WORKER_TRAINING_OPTIMIZER_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/job_config.pb.h"
#include "torch/optim/optimizer.h"
#include "torch/types.h"
#include "worker/pipeline/fusion_layout.h"
#include "worker/schemes/aggregation_scheme.h"

namespace sketchfuse {

// The run's optimizer over `params`, at rate run.learning_rate (the step
// loop sets each step's): torch::optim::SGD with run.momentum where the
// optimizer keeps the momentum (MomentumPlaceOf: the dense schemes; none
// where a compressed scheme keeps it on the worker), or torch::optim::Adam
// / AdamW with the spec's betas, eps and weight decay; where the workers keep
// Adam's moments (KeepsAdamOnTheWorker: the updates are Adam's directions),
// torch::optim::SGD with AdamW's weight decay (decoupled: without momentum,
// SGD's decay is AdamW's). INVALID_ARGUMENT naming the field for a spec that
// does not parse.
absl::StatusOr<std::unique_ptr<torch::optim::Optimizer>> MakeOptimizer(const v1::RunConfig& run,
                                                                      const std::vector<torch::Tensor>& params);

// Sets every parameter group's rate.
void SetLearningRate(torch::optim::Optimizer& optimizer, double rate);

// True for plain SGD (no momentum, no weight decay): its step is
// p -= rate * grad, which ApplyMeanUpdates takes only where an update has
// coordinates.
bool StepsOnlyTheUpdatedCoordinates(const torch::optim::Optimizer& optimizer);

// Applies a step's aggregated updates (one per group of `layout`, each the
// sum over `world` workers) to `params` (forward order; layers are numbered
// in backward order): a step of `optimizer` at rate `rate` on their mean
// (worker/pipeline/step_apply.h ForEachMeanValue).
//   - Plain SGD (StepsOnlyTheUpdatedCoordinates: the compressing schemes
//     keep the momentum on the worker) steps each coordinate an update
//     carries in place, p = fma(-rate, mean, p): torch's SGD step element
//     for element (its vectorized add is a fused multiply-add on the x86
//     builds these machines run; the same bits, tested in
//     apply_mean_updates_test), so a sparse update costs its nonzeros, not
//     the model's size.
//   - Any other optimizer (SGD with momentum, Adam, AdamW) gets the means as
//     the parameters' .grad (zero where no update reached) through `buffer`
//     (scratch), and steps: its state is dense.
// INTERNAL, with nothing applied, for an update that does not fit its group
// or parameters that do not fit the layout.
absl::Status ApplyMeanUpdates(const std::vector<Update>& updates, const FusionLayout& layout, uint32_t world,
                              double rate, std::vector<torch::Tensor>& params, torch::optim::Optimizer& optimizer,
                              std::vector<float>* buffer);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_TRAINING_OPTIMIZER_H_
