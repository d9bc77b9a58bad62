#include "worker/compression/group_compressors.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "absl/strings/str_cat.h"
#include "common/compressor_registry.h"
#include "worker/core/divergence.h"

namespace sketchfuse {

absl::StatusOr<GroupCompressors> GroupCompressors::Create(const v1::JobConfig& job, StackOptions options) {
  if (!(options.worker_momentum < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("momentum must be in [0, 1); got ", options.worker_momentum));
  }
  const bool on_device = static_cast<bool>(options.device);
  if (options.worker_adam.has_value()) {
    if (options.worker_momentum >= 0) {
      return absl::InvalidArgumentError("Adam's moments on the worker and momentum correction exclude each other");
    }
    if (on_device) return absl::InvalidArgumentError("device=gpu keeps no Adam moments on the worker");
    if (absl::Status s = ValidateAdamHyperparameters(*options.worker_adam); !s.ok()) return s;
  }
  std::vector<Stack> stacks;
  for (const v1::GroupConfig& group : job.groups()) {
    absl::StatusOr<std::unique_ptr<Compressor>> compressor = CompressorRegistry::Default().Create(group.compressor());
    if (!compressor.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("group ", group.group(), ": ", compressor.status().message()));
    }
    Stack stack;
    stack.top = *std::move(compressor);
    stack.dim = group.dim();
    if (on_device) {
      if (stack.top->keeps_aggregation_state()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "group ", group.group(), ": ", stack.top->spec(),
            " keeps state where the sum is, which runs on the host: use --device=cpu"));
      }
      const std::optional<Compressor::SketchLayout> layout = stack.top->SketchLayoutFor(group.dim());
      if (!layout.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat("group ", group.group(), ": device=gpu needs a count_sketch "
                                                       "compressor; got ", stack.top->spec()));
      }
      absl::StatusOr<std::unique_ptr<DeviceStack>> device = options.device(*layout, group.dim(), options.worker_momentum);
      if (!device.ok()) {
        return absl::Status(device.status().code(),
                            absl::StrCat("group ", group.group(), " on the GPU: ", device.status().message()));
      }
      stack.device = *std::move(device);
      stack.release_cap = options.release_cap;
      stacks.push_back(std::move(stack));
      continue;
    }
    if (stack.top->keeps_aggregation_state()) {
      // Error and momentum live with the sum (common/aggregation_state.h).
      if (options.worker_adam.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat("group ", group.group(), ": ", stack.top->spec(),
                                                       " keeps its state where the sum is; it takes no Adam "
                                                       "moments on the worker"));
      }
      stacks.push_back(std::move(stack));
      continue;
    }
    if (options.error_feedback) {
      auto ef = std::make_unique<ErrorFeedback>(std::move(stack.top));
      stack.error_feedback = ef.get();
      stack.top = std::move(ef);
    }
    if (options.worker_momentum >= 0) {
      auto momentum = std::make_unique<Momentum>(std::move(stack.top), options.worker_momentum);
      stack.momentum = momentum.get();
      stack.top = std::move(momentum);
    }
    if (options.worker_adam.has_value()) {
      auto adam = std::make_unique<AdamMoments>(std::move(stack.top), *options.worker_adam);
      stack.adam = adam.get();
      stack.top = std::move(adam);
    }
    stack.release_cap = options.release_cap;
    stacks.push_back(std::move(stack));
  }
  return GroupCompressors(std::move(stacks), on_device);
}

absl::Status GroupCompressors::CheckGroup(int group) const {
  if (group < 0 || group >= size()) {
    return absl::InvalidArgumentError(absl::StrCat("group index ", group, " is out of range [0, ", size(), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Payload> GroupCompressors::Encode(int group, GradientView grad, const EncodeContext& context) {
  if (absl::Status s = CheckGroup(group); !s.ok()) return s;
  if (grad.on_device() != on_device_) {
    return absl::FailedPreconditionError(absl::StrCat("group ", group, ": a gradient in ",
                                                      grad.on_device() ? "device" : "host", " memory for groups kept on the ",
                                                      on_device_ ? "GPU" : "host"));
  }
  Stack& stack = stacks_[group];
  absl::StatusOr<Payload> payload =
      on_device_ ? stack.device->Encode(grad, context.step) : stack.top->Encode(grad.host(), context);
  stack.sent_fraction = 1;
  stack.inserted.clear();
  if (payload.ok() && payload->kind == PayloadKind::kSketch && payload->inserted.has_value() &&
      (stack.device != nullptr || stack.error_feedback != nullptr)) {
    stack.inserted = *payload->inserted;
  }
  if (payload.ok() && stack.release_cap > 0) {
    if (absl::Status s = CapRelease(stack, &*payload); !s.ok()) return s;
  }
  // A finite gradient can still overflow the residual it is added to: such a
  // payload is never sent (the servers would refuse it; a collective would
  // spread it to every worker).
  if (payload.ok()) {
    if (absl::Status s = CheckFiniteValues("payload", static_cast<int64_t>(context.step), group, payload->values);
        !s.ok()) {
      return s;
    }
  }
  return payload;
}

absl::Status GroupCompressors::CapRelease(Stack& stack, Payload* payload) {
  // What the payload releases: a sparse payload's values, or the residual at
  // a selective sketch's inserted coordinates.
  double sent = 0;
  double velocity = 0;
  if (payload->kind == PayloadKind::kSketch && payload->inserted.has_value() && stack.device != nullptr) {
    absl::StatusOr<DeviceStack::ReleaseNorms> norms = stack.device->LastReleaseNorms();
    if (!norms.ok()) return norms.status();
    sent = norms->sent_squared;
    velocity = norms->velocity_squared;
  } else if (stack.device != nullptr) {
    return absl::OkStatus();  // a sketch of the whole group
  } else {
    if (payload->kind == PayloadKind::kSparse) {
      for (float v : payload->values) sent += static_cast<double>(v) * v;
    } else if (payload->kind == PayloadKind::kSketch && payload->inserted.has_value()) {
      const absl::Span<const float> e = stack.error_feedback->residual();
      for (uint32_t i : *payload->inserted) sent += static_cast<double>(e[i]) * e[i];
    } else {
      return absl::OkStatus();  // dense, or a sketch of the whole group: no per-coordinate release
    }
    velocity = VelocitySquared(stack);
  }
  ScaleToCap(stack, sent, velocity, absl::MakeSpan(payload->values));
  return absl::OkStatus();
}

double GroupCompressors::VelocitySquared(const Stack& stack) {
  double velocity = 0;
  for (float v : stack.momentum->velocity()) velocity += static_cast<double>(v) * v;
  return velocity;
}

void GroupCompressors::ScaleToCap(Stack& stack, double sent_squared, double velocity_squared,
                                  absl::Span<float> values) {
  const double limit = stack.release_cap * std::sqrt(velocity_squared);
  const double sent = std::sqrt(sent_squared);
  if (!(sent > limit) || !(limit > 0)) return;
  stack.sent_fraction = static_cast<float>(limit / sent);
  for (float& v : values) v *= stack.sent_fraction;
}

absl::Status GroupCompressors::CapExactValues(int group, absl::Span<float> values, uint64_t released) {
  if (absl::Status s = CheckGroup(group); !s.ok()) return s;
  Stack& stack = stacks_[group];
  stack.sent_fraction = 1;
  if (!(stack.release_cap > 0)) return absl::OkStatus();
  // A host stack caps only under error feedback and momentum correction; a
  // GPU stack always keeps error feedback, and its velocity reads 0 without
  // momentum (no cap then, as on the host).
  if (stack.device == nullptr && (stack.momentum == nullptr || stack.error_feedback == nullptr)) {
    return absl::OkStatus();
  }
  double velocity = 0;
  if (stack.device != nullptr) {
    absl::StatusOr<double> squared = stack.device->VelocitySquared();
    if (!squared.ok()) return squared.status();
    velocity = *squared;
  } else {
    velocity = VelocitySquared(stack);
  }
  // The most any `released` of the values can carry: the largest ones.
  std::vector<float> magnitudes(values.size());
  for (size_t j = 0; j < values.size(); ++j) magnitudes[j] = std::fabs(values[j]);
  const size_t top = std::min<uint64_t>(released, magnitudes.size());
  std::nth_element(magnitudes.begin(), magnitudes.begin() + top, magnitudes.end(), std::greater<float>());
  double sent = 0;
  for (size_t j = 0; j < top; ++j) sent += static_cast<double>(magnitudes[j]) * magnitudes[j];
  ScaleToCap(stack, sent, velocity, values);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> GroupCompressors::ExactValuesAt(int group, GradientView grad,
                                                                   absl::Span<const uint32_t> candidates) const {
  if (absl::Status s = CheckGroup(group); !s.ok()) return s;
  const Stack& stack = stacks_[group];
  if (stack.device != nullptr) {
    absl::StatusOr<std::vector<float>> values = stack.device->ResidualAt(candidates);
    if (!values.ok()) {
      return absl::Status(values.status().code(), absl::StrCat("group ", group, ": ", values.status().message()));
    }
    return values;
  }
  const absl::Span<const float> encoded = EncodedInput(group, grad);
  std::vector<float> values;
  values.reserve(candidates.size());
  for (const uint32_t i : candidates) {
    if (i >= encoded.size()) {
      return absl::InvalidArgumentError(absl::StrCat("group ", group, ": candidate ", i,
                                                     " is outside the encoded vector of ", encoded.size()));
    }
    values.push_back(encoded[i]);
  }
  return values;
}

absl::StatusOr<Update> GroupCompressors::Decode(int group, Payload aggregate) {
  if (absl::Status s = CheckGroup(group); !s.ok()) return s;
  if (on_device_) {
    if (absl::Status s = stacks_[group].top->CheckPayload(aggregate); !s.ok()) return s;
    return stacks_[group].device->Decode(aggregate);
  }
  return stacks_[group].top->DecodeOwned(std::move(aggregate));
}

absl::Span<const float> GroupCompressors::residual(int group) const {
  const ErrorFeedback* ef = stacks_[group].error_feedback;
  return ef == nullptr ? absl::Span<const float>() : ef->residual();
}

absl::Span<const float> GroupCompressors::EncodedInput(int group, GradientView grad) const {
  const Stack& stack = stacks_[group];
  if (stack.error_feedback != nullptr) return stack.error_feedback->residual();
  if (stack.momentum != nullptr) return stack.momentum->velocity();
  if (stack.adam != nullptr) return stack.adam->direction();
  return grad.host();
}

bool GroupCompressors::has_error_feedback() const {
  return on_device_ || (!stacks_.empty() && stacks_.front().error_feedback != nullptr);
}

absl::Status GroupCompressors::Settle(int group, const Settlement& settlement) {
  if (absl::Status s = CheckGroup(group); !s.ok()) return s;
  Stack& stack = stacks_[group];
  if (stack.device != nullptr) {
    if (settlement.give_back.dense || !settlement.give_back.indices.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("group ", group, ": a group on the GPU takes nothing back"));
    }
    // A capped payload sent only sent_fraction of each released coordinate:
    // the rest stays (as on the host).
    const float kept = stack.sent_fraction < 1 && !settlement.release.all ? 1 - stack.sent_fraction : 0.0f;
    if (!stack.inserted.empty()) {
      // The residual at the inserted coordinates, before the release zeroes
      // it: a gather of the selection's k values (a fit check first, so a
      // misfit release counts nothing).
      if (absl::Status s = ValidateCoordinates(settlement.release, stack.device->dim()); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("group ", group, " release: ", s.message()));
      }
      absl::StatusOr<std::vector<float>> at_inserted = stack.device->ResidualAt(stack.inserted);
      if (!at_inserted.ok()) {
        return absl::Status(at_inserted.status().code(),
                            absl::StrCat("group ", group, " reading the peel's recovery: ", at_inserted.status().message()));
      }
      CountRecovery(stack, *at_inserted, settlement.release);
    }
    if (absl::Status s = stack.device->Settle(settlement.release, settlement.velocity_mask, kept); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("group ", group, " ", s.message()));
    }
    stack.sent_fraction = 1;
    return absl::OkStatus();
  }
  // Validate every part first, so a misfit changes nothing.
  if (stack.momentum != nullptr) {
    if (absl::Status s = ValidateCoordinates(settlement.velocity_mask, stack.momentum->velocity().size()); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("group ", group, " velocity mask: ", s.message()));
    }
  }
  if (stack.error_feedback != nullptr) {
    const size_t dim = stack.error_feedback->residual().size();
    if (absl::Status s = ValidateCoordinates(settlement.release, dim); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("group ", group, " release: ", s.message()));
    }
    if (absl::Status s = ValidateUpdate(settlement.give_back, dim); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("group ", group, " give-back: ", s.message()));
    }
  }
  if (stack.momentum != nullptr) {
    if (absl::Status s = stack.momentum->MaskVelocity(settlement.velocity_mask); !s.ok()) return s;
  }
  if (stack.error_feedback != nullptr) {
    if (!stack.inserted.empty()) {
      const absl::Span<const float> e = stack.error_feedback->residual();
      std::vector<float> at_inserted;
      at_inserted.reserve(stack.inserted.size());
      for (uint32_t i : stack.inserted) at_inserted.push_back(e[i]);
      CountRecovery(stack, at_inserted, settlement.release);
    }
    // A capped payload sent only sent_fraction of each released coordinate:
    // the rest stays.
    Update kept;
    if (stack.sent_fraction < 1 && !settlement.release.all) {
      const absl::Span<const float> e = stack.error_feedback->residual();
      kept.dim = e.size();
      kept.indices = settlement.release.indices;
      for (uint32_t i : kept.indices) kept.values.push_back((1 - stack.sent_fraction) * e[i]);
    }
    if (absl::Status s = stack.error_feedback->Release(settlement.release); !s.ok()) return s;
    if (absl::Status s = stack.error_feedback->AddBack(settlement.give_back); !s.ok()) return s;
    if (!kept.indices.empty()) {
      if (absl::Status s = stack.error_feedback->AddBack(kept); !s.ok()) return s;
    }
    stack.sent_fraction = 1;
  }
  return absl::OkStatus();
}

void GroupCompressors::CountRecovery(Stack& stack, absl::Span<const float> at_inserted, const Coordinates& release) {
  double inserted = 0, recovered = 0;
  size_t r = 0;  // both lists ascend
  for (size_t j = 0; j < stack.inserted.size(); ++j) {
    const uint32_t i = stack.inserted[j];
    const double energy = static_cast<double>(at_inserted[j]) * at_inserted[j];
    inserted += energy;
    if (release.all) {
      recovered += energy;
      continue;
    }
    while (r < release.indices.size() && release.indices[r] < i) ++r;
    if (r < release.indices.size() && release.indices[r] == i) recovered += energy;
  }
  peel_recovery_.inserted += inserted;
  peel_recovery_.recovered += recovered;
  ++peel_recovery_.settlements;
  stack.inserted.clear();
}

absl::Status ValidateResidualRescale(float factor) {
  if (!(factor > 0) || !std::isfinite(factor)) {
    return absl::InvalidArgumentError(absl::StrCat("a residual's rescale must be finite and > 0; got ", factor));
  }
  return absl::OkStatus();
}

absl::Status GroupCompressors::ScaleResiduals(float factor) {
  if (absl::Status valid = ValidateResidualRescale(factor); !valid.ok()) return valid;
  for (size_t g = 0; g < stacks_.size(); ++g) {
    Stack& stack = stacks_[g];
    if (stack.device != nullptr) {
      if (absl::Status s = stack.device->ScaleResidual(factor); !s.ok()) {
        return absl::Status(s.code(), absl::StrCat("group ", g, ": ", s.message()));
      }
    } else if (stack.error_feedback != nullptr) {
      stack.error_feedback->ScaleResidual(factor);
    }
  }
  return absl::OkStatus();
}

FactorRoundCheck GroupCompressors::factor_check(int group) const {
  const Compressor* top = stacks_[group].top.get();
  return [top](uint32_t round, const Payload& payload) { return top->CheckFactorRound(round, payload); };
}

std::vector<GroupState> GroupCompressors::SaveState() const {
  std::vector<GroupState> state(stacks_.size());
  for (size_t g = 0; g < stacks_.size(); ++g) {
    const Stack& stack = stacks_[g];
    if (LowRankRounds* low_rank = stack.top->low_rank(); low_rank != nullptr) {
      state[g].method_state = low_rank->SaveState();
    }
    if (stack.device != nullptr) {
      // A failed copy (a lost device) leaves the parts empty: the state
      // cannot be read back then, and a restart begins from zero residuals.
      absl::StatusOr<std::vector<float>> residual = stack.device->Residual();
      absl::StatusOr<std::vector<float>> velocity = stack.device->Velocity();
      if (residual.ok()) state[g].residual = *std::move(residual);
      if (velocity.ok()) state[g].velocity = *std::move(velocity);
      continue;
    }
    if (stack.error_feedback != nullptr) {
      state[g].residual.assign(stack.error_feedback->residual().begin(), stack.error_feedback->residual().end());
    }
    if (stack.momentum != nullptr) {
      state[g].velocity.assign(stack.momentum->velocity().begin(), stack.momentum->velocity().end());
    }
    if (stack.adam != nullptr) {
      state[g].first_moment.assign(stack.adam->first_moment().begin(), stack.adam->first_moment().end());
      state[g].second_moment.assign(stack.adam->second_moment().begin(), stack.adam->second_moment().end());
      state[g].moment_steps = stack.adam->steps();
    }
  }
  return state;
}

absl::Status GroupCompressors::RestoreState(const std::vector<GroupState>& state) {
  if (state.size() != stacks_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("saved state has ", state.size(), " groups; the job has ",
                                                   stacks_.size()));
  }
  for (size_t g = 0; g < stacks_.size(); ++g) {
    const Stack& stack = stacks_[g];
    const GroupState& saved = state[g];
    if (stack.device != nullptr) {
      const size_t dim = stack.device->dim();
      if (!saved.first_moment.empty() || !saved.second_moment.empty() || saved.moment_steps > 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("saved state of group ", g, " has Adam moments; a group on the GPU keeps none"));
      }
      if ((!saved.residual.empty() && saved.residual.size() != dim) ||
          (!saved.velocity.empty() && saved.velocity.size() != dim)) {
        return absl::InvalidArgumentError(absl::StrCat("saved state of group ", g, " does not fit its ", dim,
                                                       " elements"));
      }
      continue;
    }
    if (!saved.residual.empty() && stack.error_feedback == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("saved state of group ", g, " has a residual; this run keeps no error feedback"));
    }
    if (!saved.velocity.empty() && stack.momentum == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("saved state of group ", g, " has a velocity; this run keeps no momentum on the worker"));
    }
    const bool has_moments = !saved.first_moment.empty() || !saved.second_moment.empty() || saved.moment_steps > 0;
    if (has_moments && stack.adam == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("saved state of group ", g, " has Adam moments; this run keeps none on the worker"));
    }
    if (has_moments) {
      if (absl::Status s = AdamMoments::CheckState(saved.first_moment, saved.second_moment, saved.moment_steps,
                                                   stack.dim);
          !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("saved state of group ", g, ": ", s.message()));
      }
    }
    if ((!saved.residual.empty() && saved.residual.size() != stack.dim) ||
        (!saved.velocity.empty() && saved.velocity.size() != stack.dim)) {
      return absl::InvalidArgumentError(absl::StrCat("saved state of group ", g, " has a residual of ",
                                                     saved.residual.size(), " and a velocity of ",
                                                     saved.velocity.size(), " values; the group has ", stack.dim,
                                                     " elements"));
    }
    if (LowRankRounds* low_rank = stack.top->low_rank(); low_rank != nullptr && !saved.method_state.empty()) {
      // Tried on the state itself: a refusal changes nothing, and a later
      // group's refusal puts this one back.
      const std::vector<float> before = low_rank->SaveState();
      if (absl::Status s = low_rank->RestoreState(saved.method_state); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("saved state of group ", g, ": ", s.message()));
      }
      low_rank->RestoreState(before).IgnoreError();  // its own state: cannot fail
    }
  }
  for (size_t g = 0; g < stacks_.size(); ++g) {
    if (LowRankRounds* low_rank = stacks_[g].top->low_rank(); low_rank != nullptr) {
      low_rank->RestoreState(state[g].method_state).IgnoreError();  // checked above
    }
  }
  for (size_t g = 0; g < stacks_.size(); ++g) {
    if (stacks_[g].device != nullptr) {
      if (absl::Status s = stacks_[g].device->Restore(state[g].residual, state[g].velocity); !s.ok()) {
        return absl::Status(s.code(), absl::StrCat("saved state of group ", g, ": ", s.message()));
      }
      continue;
    }
    if (stacks_[g].error_feedback != nullptr) stacks_[g].error_feedback->RestoreResidual(state[g].residual);
    if (stacks_[g].momentum != nullptr) stacks_[g].momentum->RestoreVelocity(state[g].velocity);
    if (stacks_[g].adam != nullptr) {
      stacks_[g].adam->Restore(state[g].first_moment, state[g].second_moment, state[g].moment_steps)
          .IgnoreError();  // checked above
    }
  }
  return absl::OkStatus();
}

}  // namespace sketchfuse
