#include "common/adam_moments.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace sketchfuse {

absl::Status ValidateAdamHyperparameters(const AdamHyperparameters& adam) {
  if (!(adam.beta1 >= 0 && adam.beta1 < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("beta1 must be in [0, 1); got ", adam.beta1));
  }
  if (!(adam.beta2 >= 0 && adam.beta2 < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("beta2 must be in [0, 1); got ", adam.beta2));
  }
  if (!(adam.eps > 0 && std::isfinite(adam.eps))) {
    return absl::InvalidArgumentError(absl::StrCat("eps must be finite and > 0; got ", adam.eps));
  }
  return absl::OkStatus();
}

std::string AdamMoments::spec() const {
  return absl::StrCat("adam_moments(", adam_.beta1, ", ", adam_.beta2, ", ", adam_.eps, ", ", inner_->spec(), ")");
}

absl::StatusOr<Payload> AdamMoments::Encode(absl::Span<const float> grad, const EncodeContext& context) {
  if (m_.empty()) {
    m_.assign(grad.size(), 0.0f);
    v_.assign(grad.size(), 0.0f);
  } else if (m_.size() != grad.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("adam moments hold ", m_.size(), " elements; this group has ", grad.size()));
  }
  ++steps_;
  const double t = static_cast<double>(steps_);
  const float b1 = static_cast<float>(adam_.beta1);
  const float b2 = static_cast<float>(adam_.beta2);
  const float one_minus_b1 = static_cast<float>(1 - adam_.beta1);
  const float one_minus_b2 = static_cast<float>(1 - adam_.beta2);
  const float inverse_correction1 = static_cast<float>(1 / (1 - std::pow(adam_.beta1, t)));
  const float sqrt_correction2 = static_cast<float>(std::sqrt(1 - std::pow(adam_.beta2, t)));
  const float eps = static_cast<float>(adam_.eps);
  direction_.resize(grad.size());
  float* __restrict m = m_.data();
  float* __restrict v = v_.data();
  float* __restrict d = direction_.data();
  const float* __restrict g = grad.data();
  for (size_t i = 0; i < grad.size(); ++i) {
    m[i] = b1 * m[i] + one_minus_b1 * g[i];
    v[i] = b2 * v[i] + one_minus_b2 * g[i] * g[i];
    d[i] = m[i] * inverse_correction1 / (std::sqrt(v[i]) / sqrt_correction2 + eps);
  }
  return inner_->Encode(direction_, context);
}

absl::Status AdamMoments::CheckState(absl::Span<const float> first, absl::Span<const float> second, uint64_t steps,
                                     uint64_t dim) {
  if (first.size() != second.size() || (dim > 0 && !first.empty() && first.size() != dim)) {
    return absl::InvalidArgumentError(absl::StrCat("adam moments of ", first.size(), " and ", second.size(),
                                                   " values; both must fit the group",
                                                   dim > 0 ? absl::StrCat(" of ", dim) : ""));
  }
  if (first.empty() != (steps == 0)) {
    return absl::InvalidArgumentError(absl::StrCat("adam moments of ", first.size(), " values after ", steps,
                                                   " steps"));
  }
  for (size_t i = 0; i < second.size(); ++i) {
    if (!(second[i] >= 0) || !std::isfinite(first[i]) || !std::isfinite(second[i])) {
      return absl::InvalidArgumentError(absl::StrCat("adam moments at ", i, ": ", first[i], ", ", second[i],
                                                     " (finite, the second >= 0)"));
    }
  }
  return absl::OkStatus();
}

absl::Status AdamMoments::Restore(absl::Span<const float> first, absl::Span<const float> second, uint64_t steps) {
  if (absl::Status s = CheckState(first, second, steps, 0); !s.ok()) return s;
  m_.assign(first.begin(), first.end());
  v_.assign(second.begin(), second.end());
  steps_ = steps;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<AdamMoments>> WithAdamMoments(std::unique_ptr<Compressor> inner,
                                                             const AdamHyperparameters& adam) {
  if (absl::Status s = ValidateAdamHyperparameters(adam); !s.ok()) return s;
  return std::make_unique<AdamMoments>(std::move(inner), adam);
}

}  // namespace sketchfuse
