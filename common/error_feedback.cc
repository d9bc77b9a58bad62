#include "common/error_feedback.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace sketchfuse {
namespace {

// Sizes `state` on first use; afterwards the group size must not change.
absl::Status PrepareState(absl::string_view what, size_t n, std::vector<float>* state) {
  if (state->empty()) {
    state->assign(n, 0.0f);
    return absl::OkStatus();
  }
  if (state->size() != n) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " holds ", state->size(), " elements; this group has ", n));
  }
  return absl::OkStatus();
}

void ZeroAt(const Coordinates& coordinates, std::vector<float>* state) {
  if (coordinates.all) {
    std::fill(state->begin(), state->end(), 0.0f);
    return;
  }
  for (uint32_t i : coordinates.indices) (*state)[i] = 0.0f;
}

}  // namespace

Coordinates Coordinates::All(uint64_t dim) {
  Coordinates all;
  all.dim = dim;
  all.all = true;
  return all;
}

Coordinates Coordinates::Of(const Update& update) {
  Coordinates coordinates;
  coordinates.dim = update.dim;
  coordinates.all = update.dense;
  if (!update.dense) coordinates.indices = update.indices;
  return coordinates;
}

absl::Status ValidateCoordinates(const Coordinates& coordinates, uint64_t dim) {
  if (coordinates.dim != dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("coordinates are of a group of ", coordinates.dim, " elements, not ", dim));
  }
  if (coordinates.all) {
    if (!coordinates.indices.empty()) return absl::InvalidArgumentError("all coordinates, and indices too");
    return absl::OkStatus();
  }
  for (size_t i = 0; i < coordinates.indices.size(); ++i) {
    if (coordinates.indices[i] >= dim || (i > 0 && coordinates.indices[i] <= coordinates.indices[i - 1])) {
      return absl::InvalidArgumentError(absl::StrCat("indices[", i, "] = ", coordinates.indices[i],
                                                     " is out of range or not ascending for a group of ", dim));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateUpdate(const Update& update, uint64_t dim) {
  if (update.dim != dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("update is for a group of ", update.dim, " elements, not ", dim));
  }
  if (update.dense) {
    if (update.values.size() != dim || !update.indices.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dense update must carry ", dim, " values and no indices; has ", update.values.size(),
          " values and ", update.indices.size(), " indices"));
    }
    return absl::OkStatus();
  }
  if (update.values.size() != update.indices.size()) {
    return absl::InvalidArgumentError(absl::StrCat("sparse update has ", update.indices.size(),
                                                   " indices but ", update.values.size(),
                                                   " values"));
  }
  for (size_t i = 0; i < update.indices.size(); ++i) {
    if (update.indices[i] >= dim || (i > 0 && update.indices[i] <= update.indices[i - 1])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "update indices[", i, "] = ", update.indices[i],
          " is out of range or not ascending for a group of ", dim));
    }
  }
  return absl::OkStatus();
}

bool IsCandidateList(const Update& update) {
  return !update.dense && update.values.empty() && !update.indices.empty();
}

absl::Status ValidateAnswer(const Update& update, uint64_t dim) {
  if (!IsCandidateList(update)) return ValidateUpdate(update, dim);
  if (update.dim != dim) {
    return absl::InvalidArgumentError(absl::StrCat("candidate list is for a group of ", update.dim, " elements, not ",
                                                   dim));
  }
  for (size_t i = 0; i < update.indices.size(); ++i) {
    if (update.indices[i] >= dim || (i > 0 && update.indices[i] <= update.indices[i - 1])) {
      return absl::InvalidArgumentError(absl::StrCat("candidate indices[", i, "] = ", update.indices[i],
                                                     " is out of range or not ascending for a group of ", dim));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Payload> ErrorFeedback::Encode(absl::Span<const float> grad,
                                              const EncodeContext& context) {
  absl::Status ready = PrepareState("error-feedback residual", grad.size(), &residual_);
  if (!ready.ok()) return ready;
  float* __restrict e = residual_.data();
  const float* __restrict g = grad.data();
  for (size_t i = 0; i < grad.size(); ++i) e[i] += g[i];
  return inner_->Encode(residual_, context);
}

absl::Status ErrorFeedback::OnApplied(const Update& update) {
  absl::Status valid = ValidateUpdate(update, residual_.size());
  if (!valid.ok()) return valid;
  ZeroAt(Coordinates::Of(update), &residual_);
  return inner_->OnApplied(update);
}

absl::Status ErrorFeedback::Release(const Coordinates& coordinates) {
  absl::Status valid = ValidateCoordinates(coordinates, residual_.size());
  if (!valid.ok()) return valid;
  ZeroAt(coordinates, &residual_);
  return absl::OkStatus();
}

absl::Status ErrorFeedback::AddBack(const Update& values) {
  absl::Status valid = ValidateUpdate(values, residual_.size());
  if (!valid.ok()) return valid;
  if (values.dense) {
    for (size_t i = 0; i < residual_.size(); ++i) residual_[i] += values.values[i];
  } else {
    for (size_t j = 0; j < values.indices.size(); ++j) residual_[values.indices[j]] += values.values[j];
  }
  return absl::OkStatus();
}

std::string Momentum::spec() const {
  return absl::StrCat("momentum(", momentum_, ", ", inner_->spec(), ")");
}

absl::StatusOr<Payload> Momentum::Encode(absl::Span<const float> grad,
                                         const EncodeContext& context) {
  absl::Status ready = PrepareState("momentum", grad.size(), &velocity_);
  if (!ready.ok()) return ready;
  float* __restrict u = velocity_.data();
  const float* __restrict g = grad.data();
  const float m = momentum_;
  for (size_t i = 0; i < grad.size(); ++i) u[i] = m * u[i] + g[i];
  return inner_->Encode(velocity_, context);
}

absl::Status Momentum::OnApplied(const Update& update) {
  absl::Status valid = ValidateUpdate(update, velocity_.size());
  if (!valid.ok()) return valid;
  ZeroAt(Coordinates::Of(update), &velocity_);
  return inner_->OnApplied(update);
}

absl::Status Momentum::MaskVelocity(const Coordinates& mask) {
  absl::Status valid = ValidateCoordinates(mask, velocity_.size());
  if (!valid.ok()) return valid;
  ZeroAt(mask, &velocity_);
  return absl::OkStatus();
}

std::unique_ptr<Compressor> WithErrorFeedback(std::unique_ptr<Compressor> inner) {
  return std::make_unique<ErrorFeedback>(std::move(inner));
}

absl::StatusOr<std::unique_ptr<Compressor>> WithMomentum(std::unique_ptr<Compressor> inner,
                                                         double momentum) {
  if (!(momentum >= 0.0 && momentum < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("momentum must be in [0, 1); got ", momentum));
  }
  return std::unique_ptr<Compressor>(
      std::make_unique<Momentum>(std::move(inner), static_cast<float>(momentum)));
}

}  // namespace sketchfuse
