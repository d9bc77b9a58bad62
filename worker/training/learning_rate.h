// The run's learning-rate schedule and what it asks of error feedback: the
// rate of each step (linear scaling with the workers after a warm-up), and
// the factor a run that keeps its residuals in units of the rate rescales
// them by when the rate changes. Shared by the trainer, the virtual workers
// and the synthetic runner (no LibTorch here).
#ifndef SKETCHFUSE_WORKER_TRAINING_LEARNING_RATE_H_
#define SKETCHFUSE_WORKER_TRAINING_LEARNING_RATE_H_

#include <cstdint>

#include "proto/job_config.pb.h"

namespace sketchfuse {

inline constexpr char kConstantSchedule[] = "constant";
inline constexpr char kCosineSchedule[] = "cosine";

// The learning rate of step `step` of `run` with `world` workers
// (v1::RunConfig's lr_schedule, lr_base_workers, lr_warmup_steps and
// lr_final_fraction). The peak is learning_rate, times world / base with a
// base.
//   constant (or empty): learning_rate without a base; else the peak,
//     reached linearly from learning_rate over the warm-up steps.
//   cosine: peak * (step + 1) / warmup during the warm-up, then a half
//     cosine from the peak down to lr_final_fraction * peak at the run's
//     last step (steps_per_epoch * epochs - 1).
double LearningRateAt(const v1::RunConfig& run, uint32_t world, int64_t step);

// What a run that keeps its residuals in units of the learning rate
// (v1::RunConfig residual_in_rate_units) multiplies them by once step `step`
// is applied, before step + 1 encodes: LearningRateAt(step) /
// LearningRateAt(step + 1). 1 when the rate does not change then, or when the
// run keeps its residuals in raw gradients (AggregationScheme::ScaleResiduals
// applies it).
float ResidualRescaleAfter(const v1::RunConfig& run, uint32_t world, int64_t step);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_TRAINING_LEARNING_RATE_H_
