// Adam's moments on the worker, before compression: a decorator that turns
// each step's gradient into Adam's update direction and encodes that.
//
// Encode(g), at the group's t-th encode (t from 1):
//   m = beta1 m + (1 - beta1) g
//   v = beta2 v + (1 - beta2) g^2
//   d = (m / (1 - beta1^t)) / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// and encodes d (torch::optim::Adam's direction, element for element). The
// worker applies the mean of the decoded directions at the step's rate
// (p -= rate * mean, weight decay decoupled: AdamW's), so with every
// coordinate sent each step the run is Adam's on each worker's own
// moments; under error feedback what waits is Adam's update, not a raw
// gradient: a coordinate sent after k steps moves by the k directions it
// owes, where Adam on a sparse aggregated gradient sees one spike and k - 1
// zeros, and so steps about sqrt(k) times too short (docs/BENCHMARKS.md,
// "The transformer with AdamW and SGD").
//
// The moments are not masked where an update was applied: m is an average
// of gradients (Adam's), not a sum that a release would double-count.
//
// NOTE: not thread-safe; one instance per fusion group.
#ifndef SKETCHFUSE_COMMON_ADAM_MOMENTS_H_
#define SKETCHFUSE_COMMON_ADAM_MOMENTS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/compressor.h"
#include "common/error_feedback.h"

namespace sketchfuse {

struct AdamHyperparameters {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

// OK if 0 <= beta1 < 1, 0 <= beta2 < 1 and eps > 0 (all finite);
// INVALID_ARGUMENT naming the value otherwise.
absl::Status ValidateAdamHyperparameters(const AdamHyperparameters& adam);

class AdamMoments final : public CompressorDecorator {
 public:
  // `adam` checked by ValidateAdamHyperparameters (WithAdamMoments).
  AdamMoments(std::unique_ptr<Compressor> inner, AdamHyperparameters adam)
      : CompressorDecorator(std::move(inner)), adam_(adam) {}

  std::string spec() const override;

  // Updates the moments with `grad`, then encodes the direction (above).
  // FAILED_PRECONDITION if the group size changed; a non-finite gradient
  // value is the caller's to refuse (the step loop's finite check).
  absl::StatusOr<Payload> Encode(absl::Span<const float> grad, const EncodeContext& context) override;
  // Informs the inner compressor; the moments are kept.
  absl::Status OnApplied(const Update& update) override { return inner_->OnApplied(update); }

  absl::Span<const float> first_moment() const { return m_; }
  absl::Span<const float> second_moment() const { return v_; }
  // The encodes so far (Adam's t).
  uint64_t steps() const { return steps_; }
  // The direction the last Encode encoded (empty before it).
  absl::Span<const float> direction() const { return direction_; }

  // OK if `first`, `second` and `steps` are a state Restore takes for a
  // group of `dim` elements (dim 0: any size); INVALID_ARGUMENT naming the
  // misfit otherwise.
  static absl::Status CheckState(absl::Span<const float> first, absl::Span<const float> second, uint64_t steps,
                                 uint64_t dim);

  // Replaces the state (a worker resuming from its checkpoint): both moments
  // of the same size (or both empty, with steps 0), finite, the second >= 0
  // (CheckState). INVALID_ARGUMENT, and nothing changed, otherwise.
  absl::Status Restore(absl::Span<const float> first, absl::Span<const float> second, uint64_t steps);

 private:
  AdamHyperparameters adam_;
  std::vector<float> m_;
  std::vector<float> v_;
  std::vector<float> direction_;  // scratch: what is encoded
  uint64_t steps_ = 0;
};

// Decorates `inner` with Adam's moments; INVALID_ARGUMENT for bad
// hyperparameters (ValidateAdamHyperparameters).
absl::StatusOr<std::unique_ptr<AdamMoments>> WithAdamMoments(std::unique_ptr<Compressor> inner,
                                                             const AdamHyperparameters& adam);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_ADAM_MOMENTS_H_
