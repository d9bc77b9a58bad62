// Linear cost models of the per-group work of gradient fusion, and their fit.
//
// Every per-group cost (encode, transfer, decode) is modelled as an affine
// function t(x) = alpha + beta * x of the group's element count x, in seconds:
// alpha is the fixed per-group overhead (kernel launch, message latency) and
// beta the per-element time. FitLinearCost fits such a model to measured
// samples by ordinary least squares. The fusion planner
// (common/fusion_planner.h) consumes a GroupCostModel of three of them.
#ifndef SKETCHFUSE_COMMON_COST_MODEL_H_
#define SKETCHFUSE_COMMON_COST_MODEL_H_

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace sketchfuse {

// t(x) = alpha + beta * x, in seconds; x is a number of gradient elements.
// A fitted model may have a slightly negative alpha; callers that need a
// non-negative time clamp it themselves.
struct LinearCost {
  double alpha = 0;
  double beta = 0;
  // Returns alpha + beta * x.
  double operator()(double x) const;
};

// The result of FitLinearCost: the fitted cost and its coefficient of
// determination R^2 in [0, 1] (1 when every sample lies on the line, including
// the degenerate case of all-equal seconds).
struct LinearFit {
  LinearCost cost;
  double r_squared = 0;
};

// Ordinary least squares fit of the samples (x[i], seconds[i]).
// INVALID_ARGUMENT, with a message naming the problem, when the spans differ
// in length, hold fewer than 2 samples, contain a non-finite value, or have
// fewer than 2 distinct x values.
absl::StatusOr<LinearFit> FitLinearCost(absl::Span<const double> x,
                                        absl::Span<const double> seconds);

// Costs of one fused group as functions of its element count n.
struct GroupCostModel {
  // Encode on the compute device; it delays the rest of the backward pass
  // because it runs on the same device.
  LinearCost compress;
  // Communication of the payload: alpha is the latency, beta the per-element
  // time with the compression ratio folded in.
  LinearCost transfer;
  // Decode after aggregation; runs in the communication pipeline.
  LinearCost decode;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_COST_MODEL_H_
