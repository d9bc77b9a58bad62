// Ordinary least squares fit of the linear per-group cost models.
#include "common/cost_model.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace sketchfuse {

double LinearCost::operator()(double x) const { return alpha + beta * x; }

absl::StatusOr<LinearFit> FitLinearCost(absl::Span<const double> x,
                                        absl::Span<const double> seconds) {
  if (x.size() != seconds.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("FitLinearCost: x and seconds differ in length (", x.size(),
                     " vs ", seconds.size(), ")"));
  }
  const size_t n = x.size();
  if (n < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "FitLinearCost: need at least 2 samples, got ", n));
  }
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(seconds[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "FitLinearCost: sample ", i, " has a non-finite value (x=", x[i],
          ", seconds=", seconds[i], ")"));
    }
  }
  if (std::all_of(x.begin(), x.end(), [&](double v) { return v == x[0]; })) {
    return absl::InvalidArgumentError(absl::StrCat(
        "FitLinearCost: need at least 2 distinct x values, all are ", x[0]));
  }

  double mean_x = 0, mean_y = 0;
  for (size_t i = 0; i < n; ++i) {
    mean_x += x[i];
    mean_y += seconds[i];
  }
  mean_x /= static_cast<double>(n);
  mean_y /= static_cast<double>(n);
  double sxx = 0, sxy = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    const double dx = x[i] - mean_x;
    const double dy = seconds[i] - mean_y;
    sxx += dx * dx;
    sxy += dx * dy;
    syy += dy * dy;
  }
  if (!(sxx > 0) || !std::isfinite(sxx) || !std::isfinite(sxy)) {
    return absl::InvalidArgumentError(
        "FitLinearCost: x values too close together or too large to fit");
  }

  LinearFit fit;
  fit.cost.beta = sxy / sxx;
  fit.cost.alpha = mean_y - fit.cost.beta * mean_x;
  if (syy == 0) {
    fit.r_squared = 1.0;
  } else {
    double ss_res = 0;
    for (size_t i = 0; i < n; ++i) {
      const double r = seconds[i] - fit.cost(x[i]);
      ss_res += r * r;
    }
    fit.r_squared = std::clamp(1.0 - ss_res / syy, 0.0, 1.0);
  }
  return fit;
}

}  // namespace sketchfuse
