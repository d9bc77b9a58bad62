// Error feedback and momentum as decorators over any compressor.
//
// ErrorFeedback keeps a residual e per group: Encode(g) adds g to e and
// encodes e; OnApplied(update) zeroes e at the applied coordinates (all of
// them for a dense update). So the residual keeps exactly what was not
// applied: at every point, (sum of the values released by OnApplied) + e ==
// (sum of every gradient encoded), up to float rounding. For a one-round
// sketch the update carries estimates of the global sum, while the worker
// releases its own residual values at those coordinates (Sketched-SGD).
//
// Momentum keeps u per group: Encode(g) sets u = m * u + g and encodes u;
// OnApplied zeroes u at the applied coordinates (momentum factor masking, as in
// DGC and Sketched-SGD). Compose as WithMomentum(WithErrorFeedback(c), m):
// u = m u + g; e += u; encode e.
//
// Residual state changes only in Encode and OnApplied: a step whose update is
// never applied (a failed round) leaves nothing lost, and re-encoding after a
// failure must use the same step's gradient only once (the worker's job).
//
// NOTE: not thread-safe; one instance per fusion group.
#ifndef SKETCHFUSE_COMMON_ERROR_FEEDBACK_H_
#define SKETCHFUSE_COMMON_ERROR_FEEDBACK_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/compressor.h"

namespace sketchfuse {

// A set of a group's coordinates: all of them, or ascending indices below
// dim. What a step releases from a residual or masks in a velocity; unlike an
// Update it carries no values (a dense release costs nothing to describe).
struct Coordinates {
  uint64_t dim = 0;
  bool all = false;
  std::vector<uint32_t> indices;  // when !all

  static Coordinates All(uint64_t dim);
  // The update's coordinates: all of them for a dense update.
  static Coordinates Of(const Update& update);
};

// OK if `coordinates` fits a group of `dim` elements (ascending, in range).
absl::Status ValidateCoordinates(const Coordinates& coordinates, uint64_t dim);

// Base of the decorators: forwards kind, linearity and decode to the wrapped
// compressor, which it owns.
class CompressorDecorator : public Compressor {
 public:
  PayloadKind payload_kind() const override { return inner_->payload_kind(); }
  bool linear() const override { return inner_->linear(); }
  absl::StatusOr<Update> Decode(const Payload& aggregate) const override {
    return inner_->Decode(aggregate);
  }
  absl::StatusOr<Update> DecodeOwned(Payload aggregate) const override {
    return inner_->DecodeOwned(std::move(aggregate));
  }
  absl::Status CheckPayload(const Payload& payload) const override {
    return inner_->CheckPayload(payload);
  }
  absl::Status CheckPayloadForStep(const Payload& payload, uint64_t step) const override {
    return inner_->CheckPayloadForStep(payload, step);
  }
  std::optional<SketchLayout> SketchLayoutFor(uint64_t dim) const override {
    return inner_->SketchLayoutFor(dim);
  }
  bool keeps_aggregation_state() const override { return inner_->keeps_aggregation_state(); }
  LowRankRounds* low_rank() override { return inner_->low_rank(); }
  bool sums_factor_rounds() const override { return inner_->sums_factor_rounds(); }
  absl::Status CheckFactorRound(uint32_t round, const Payload& payload) const override {
    return inner_->CheckFactorRound(round, payload);
  }
  absl::StatusOr<std::unique_ptr<AggregationState>> NewAggregationState(uint64_t dim) const override {
    return inner_->NewAggregationState(dim);
  }

  Compressor* inner() const { return inner_.get(); }

 protected:
  explicit CompressorDecorator(std::unique_ptr<Compressor> inner) : inner_(std::move(inner)) {}

  std::unique_ptr<Compressor> inner_;
};

class ErrorFeedback final : public CompressorDecorator {
 public:
  explicit ErrorFeedback(std::unique_ptr<Compressor> inner)
      : CompressorDecorator(std::move(inner)) {}

  std::string spec() const override { return "ef(" + inner_->spec() + ")"; }

  // e += grad, then encodes e. FAILED_PRECONDITION if the group size changed.
  absl::StatusOr<Payload> Encode(absl::Span<const float> grad,
                                 const EncodeContext& context) override;
  // Zeroes e at the update's coordinates. INVALID_ARGUMENT (and e unchanged)
  // if the update does not fit the group.
  absl::Status OnApplied(const Update& update) override;

  // Zeroes e at `coordinates` (the inner compressor is not told).
  // INVALID_ARGUMENT (and e unchanged) if they do not fit the group.
  absl::Status Release(const Coordinates& coordinates);

  // e += values (dense or sparse): what a decentralized scheme received from
  // its peers and did not forward (global residual collection), so no
  // gradient is lost. INVALID_ARGUMENT (and e unchanged) if `values` does not
  // fit the group.
  absl::Status AddBack(const Update& values);

  // e *= factor: the residual kept in units of the current learning rate
  // when the rate changes from r to r' (factor r / r'; the run's
  // residual_in_rate_units), so what waits in e is applied at the rate of
  // the steps that made it (EF-SGD's rate-scaled residual). One rounded
  // product per element.
  void ScaleResidual(float factor) {
    for (float& e : residual_) e *= factor;
  }

  // The current residual (empty before the first Encode).
  absl::Span<const float> residual() const { return residual_; }
  // Replaces the residual (a worker resuming from its checkpoint).
  void RestoreResidual(absl::Span<const float> residual) {
    residual_.assign(residual.begin(), residual.end());
  }

 private:
  std::vector<float> residual_;
};

class Momentum final : public CompressorDecorator {
 public:
  // momentum in [0, 1).
  Momentum(std::unique_ptr<Compressor> inner, float momentum)
      : CompressorDecorator(std::move(inner)), momentum_(momentum) {}

  std::string spec() const override;

  // u = momentum * u + grad, then encodes u.
  absl::StatusOr<Payload> Encode(absl::Span<const float> grad,
                                 const EncodeContext& context) override;
  // Zeroes u at the update's coordinates, then informs the inner compressor.
  absl::Status OnApplied(const Update& update) override;

  // Zeroes u at `mask` only (the inner compressor is not told): for schemes
  // whose residual release and velocity masking differ.
  absl::Status MaskVelocity(const Coordinates& mask);

  absl::Span<const float> velocity() const { return velocity_; }
  // Replaces the velocity (a worker resuming from its checkpoint).
  void RestoreVelocity(absl::Span<const float> velocity) {
    velocity_.assign(velocity.begin(), velocity.end());
  }

 private:
  float momentum_;
  std::vector<float> velocity_;
};

// Decorates `inner` with error feedback.
std::unique_ptr<Compressor> WithErrorFeedback(std::unique_ptr<Compressor> inner);

// Decorates `inner` with momentum; INVALID_ARGUMENT unless 0 <= momentum < 1.
absl::StatusOr<std::unique_ptr<Compressor>> WithMomentum(std::unique_ptr<Compressor> inner,
                                                         double momentum);

// OK if `update` fits a group of `dim` elements (dense with dim values, or
// sparse with ascending in-range indices and one value each).
absl::Status ValidateUpdate(const Update& update, uint64_t dim);

// A candidate list: the first answer of a group with a second round, which a
// worker needs only the indices of (it pushes its exact values there): a
// sparse update with indices and no values. It is never applied.
bool IsCandidateList(const Update& update);
// OK if `update` is a shard's answer for a group of `dim` elements: an
// update (ValidateUpdate), or a candidate list with ascending in-range
// indices. Whether a list may stand where it does is the caller's rule.
absl::Status ValidateAnswer(const Update& update, uint64_t dim);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_ERROR_FEEDBACK_H_
