#include "worker/training/learning_rate.h"

namespace sketchfuse {

double LearningRateAt(const v1::RunConfig& run, uint32_t world, int64_t step) {
  const double base = run.learning_rate();
  if (run.lr_base_workers() == 0) return base;
  const double peak = base * static_cast<double>(world) / static_cast<double>(run.lr_base_workers());
  if (step >= static_cast<int64_t>(run.lr_warmup_steps())) return peak;
  return base + (peak - base) * static_cast<double>(step) / static_cast<double>(run.lr_warmup_steps());
}

float ResidualRescaleAfter(const v1::RunConfig& run, uint32_t world, int64_t step) {
  if (!run.residual_in_rate_units()) return 1.0f;
  const double now = LearningRateAt(run, world, step), next = LearningRateAt(run, world, step + 1);
  return now == next ? 1.0f : static_cast<float>(now / next);
}

}  // namespace sketchfuse
