#include "worker/training/learning_rate.h"

#include <algorithm>
#include <cmath>

namespace sketchfuse {

namespace {

// The half cosine from the peak (at the warm-up's end) to final * peak (at
// the run's last step); the peak through a warm-up from peak / warmup.
double CosineRateAt(const v1::RunConfig& run, double peak, int64_t step) {
  const int64_t warmup = run.lr_warmup_steps();
  if (step < warmup) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup);
  const int64_t last = static_cast<int64_t>(run.steps_per_epoch()) * run.epochs() - 1;
  if (last <= warmup) return peak;  // no step left to decay over
  const double progress =
      std::min(1.0, static_cast<double>(step - warmup) / static_cast<double>(last - warmup));
  const double final_rate = run.lr_final_fraction() * peak;
  return final_rate + (peak - final_rate) * 0.5 * (1.0 + std::cos(M_PI * progress));
}

}  // namespace

double LearningRateAt(const v1::RunConfig& run, uint32_t world, int64_t step) {
  const double base = run.learning_rate();
  const double peak = run.lr_base_workers() == 0
                          ? base
                          : base * static_cast<double>(world) / static_cast<double>(run.lr_base_workers());
  if (run.lr_schedule() == kCosineSchedule) return CosineRateAt(run, peak, step);
  if (run.lr_base_workers() == 0) return base;
  if (step >= static_cast<int64_t>(run.lr_warmup_steps())) return peak;
  return base + (peak - base) * static_cast<double>(step) / static_cast<double>(run.lr_warmup_steps());
}

float ResidualRescaleAfter(const v1::RunConfig& run, uint32_t world, int64_t step) {
  if (!run.residual_in_rate_units()) return 1.0f;
  const double now = LearningRateAt(run, world, step), next = LearningRateAt(run, world, step + 1);
  return now == next ? 1.0f : static_cast<float>(now / next);
}

}  // namespace sketchfuse
