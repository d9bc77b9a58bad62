#include "worker/schemes/collective_scheme.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/run_config.h"
#include "worker/schemes/scheme_registry.h"

namespace sketchfuse {

absl::StatusOr<std::unique_ptr<CollectiveScheme>> CollectiveScheme::Create(const v1::JobConfig& job,
                                                                          Collective* collective) {
  if (collective == nullptr) return absl::InvalidArgumentError("no collective");
  const v1::RunConfig& run = job.run();
  if (absl::Status s = CheckRunScheme(run); !s.ok()) return s;
  const SchemeInfo scheme_info = *FindScheme(run.scheme());
  if (scheme_info.route != Route::kDecentralized) {
    return absl::InvalidArgumentError(absl::StrCat("'", run.scheme(), "' is not a decentralized scheme"));
  }
  if (job.world_size() != static_cast<uint32_t>(collective->size())) {
    return absl::InvalidArgumentError(absl::StrCat("the job has ", job.world_size(), " workers; the collective ",
                                                   collective->size(), " ranks"));
  }
  absl::StatusOr<GroupCompressors> compressors = CompressorsFor(job);
  if (!compressors.ok()) return compressors.status();
  absl::StatusOr<std::vector<uint64_t>> selection = JobSelectionSizes(job);
  if (!selection.ok()) return selection.status();
  absl::StatusOr<std::vector<uint64_t>> reselect = JobFinalRoundTopK(job);
  if (!reselect.ok()) return reselect.status();
  std::vector<std::unique_ptr<AggregationState>> method_state(job.groups_size());
  for (int g = 0; g < job.groups_size(); ++g) {
    absl::StatusOr<std::unique_ptr<AggregationState>> state =
        compressors->compressor(g).NewAggregationState(job.groups(g).dim());
    if (!state.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("group ", job.groups(g).group(), ": ", state.status().message()));
    }
    method_state[g] = *std::move(state);
  }
  auto scheme = std::unique_ptr<CollectiveScheme>(new CollectiveScheme(
      scheme_info, *std::move(compressors), *std::move(selection), *std::move(reselect), RoundsPerStep(run),
      collective));
  scheme->method_state_ = std::move(method_state);
  return scheme;
}

CollectiveScheme::CollectiveScheme(SchemeInfo scheme, GroupCompressors compressors, std::vector<uint64_t> selection,
                                   std::vector<uint64_t> reselect, uint32_t rounds, Collective* collective)
    : scheme_(std::move(scheme)),
      compressors_(std::move(compressors)),
      selection_(std::move(selection)),
      reselect_(std::move(reselect)),
      rounds_(rounds),
      collective_(collective),
      pending_(compressors_.size()) {}

void CollectiveScheme::Exchange(uint64_t step, int group, GradientView grad,
                                absl::Span<const float> params, ExchangeDone done) {
  const absl::Time start = absl::Now();
  absl::StatusOr<Payload> payload = compressors_.Encode(group, grad, EncodeContext{step, params});
  if (!payload.ok()) {
    done(payload.status());
    return;
  }
  GroupInput input;
  input.step = step;
  input.group = group;
  input.payload = &*payload;
  input.encoded = compressors_.EncodedInput(group, grad);
  input.exact_values = [this, group, grad](absl::Span<const uint32_t> candidates) {
    return compressors_.ExactValuesAt(group, grad, candidates);
  };
  input.k = selection_[group];
  input.rounds = rounds_;
  input.reselect_top_k = reselect_[group];
  input.cap_exact_values = [this, group, k = input.k](absl::Span<float> values) {
    return compressors_.CapExactValues(group, values, k);
  };
  input.low_rank = compressors_.low_rank(group);
  if (input.low_rank != nullptr) input.factor_check = compressors_.factor_check(group);
  if (method_state_[group] != nullptr) {
    // The allreduced sum steps this worker's copy of the method's state.
    input.decode = [this, group](const Payload& sum) { return method_state_[group]->Step(sum); };
  } else {
    input.decode = [this, group](Payload sum) { return compressors_.Decode(group, std::move(sum)); };
  }
  const uint64_t bytes_before = collective_->bytes_sent();
  const uint64_t received_before = collective_->bytes_received();
  const absl::Time encoded = absl::Now();
  absl::StatusOr<GroupOutcome> outcome = scheme_.algorithm(*collective_, input);
  if (!outcome.ok()) {
    done(absl::Status(outcome.status().code(),
                      absl::StrCat(scheme_.name, " of group ", group, " at step ", step, ": ", outcome.status().message())));
    return;
  }
  pending_[group] = std::move(outcome->settlement);
  ExchangeResult result;
  result.update = std::move(outcome->update);
  result.bytes_sent = collective_->bytes_sent() - bytes_before;
  result.bytes_received = collective_->bytes_received() - received_before;
  result.dense_bytes = grad.size() * sizeof(float);
  result.route = Route::kDecentralized;
  result.spans = CollectiveSpans(encoded, absl::Now(), outcome->decode_time);
  result.spans.insert(result.spans.begin(), TraceSpan{"compress", start, encoded});
  done(std::move(result));
}

std::vector<TraceSpan> CollectiveSpans(absl::Time begin, absl::Time end, absl::Duration decode) {
  if (decode <= absl::ZeroDuration()) return {{"communicate", begin, end}};
  return {{"communicate", begin, end - decode}, {"decode", end - decode, end}};
}

std::vector<GroupState> CollectiveScheme::SaveState() const {
  std::vector<GroupState> state = compressors_.SaveState();
  for (size_t g = 0; g < method_state_.size(); ++g) {
    if (method_state_[g] != nullptr) state[g].method_state = method_state_[g]->Save();
  }
  return state;
}

absl::Status CollectiveScheme::RestoreState(const std::vector<GroupState>& state) {
  if (state.size() != method_state_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("saved state has ", state.size(), " groups; the job has ",
                                                   method_state_.size()));
  }
  std::vector<std::unique_ptr<AggregationState>> restored(method_state_.size());
  for (size_t g = 0; g < method_state_.size(); ++g) {
    if (method_state_[g] == nullptr) {
      // A low-rank group's method state is its warm start, which the
      // compressors restore.
      if (!state[g].method_state.empty() && compressors_.low_rank(static_cast<int>(g)) == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("saved state of group ", g, " has method state; this run's method keeps none"));
      }
      continue;
    }
    if (state[g].method_state.empty()) continue;  // begins from zero sketches
    restored[g] = method_state_[g]->Clone();
    if (absl::Status s = restored[g]->Restore(state[g].method_state); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("saved state of group ", g, ": ", s.message()));
    }
  }
  if (absl::Status s = compressors_.RestoreState(state); !s.ok()) return s;
  for (size_t g = 0; g < method_state_.size(); ++g) {
    if (restored[g] != nullptr) method_state_[g] = std::move(restored[g]);
  }
  return absl::OkStatus();
}

absl::Status CollectiveScheme::OnApplied(int group, const Update& update) {
  if (absl::Status s = compressors_.CheckGroup(group); !s.ok()) return s;
  if (!pending_[group].has_value()) {
    return absl::FailedPreconditionError(absl::StrCat("group ", group, " has no exchanged update to settle"));
  }
  absl::Status settled = compressors_.Settle(group, *pending_[group]);
  pending_[group].reset();
  return settled;
}

}  // namespace sketchfuse
