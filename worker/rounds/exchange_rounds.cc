#include "worker/rounds/exchange_rounds.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/error_feedback.h"

namespace sketchfuse {
namespace {

// One exchange in flight: shared by the reducer's callbacks.
struct Exchange {
  RoundReducer* reducer = nullptr;
  RoundsInput input;
  RoundsOutcome outcome;
  RoundsDone done;
  Update first_answer;  // a low-rank method's round 0 answer, until its finish
};

// This worker's exact values at the `candidates` round `round` answered, in
// their order and without indices, capped where the run caps releases.
absl::StatusOr<std::shared_ptr<const Payload>> ValuesAtCandidates(const RoundsInput& input, uint32_t round,
                                                                 const Update& candidates) {
  if (candidates.dense || candidates.dim != input.payload->dim) {
    return absl::InternalError(absl::StrCat("group ", input.group, " at step ", input.step, ": round ", round,
                                            "'s answer cannot start round ", round + 1));
  }
  for (const uint32_t i : candidates.indices) {
    if (i >= candidates.dim) {
      return absl::InternalError(absl::StrCat("group ", input.group, " at step ", input.step, ": candidate ", i,
                                              " is outside the group of ", candidates.dim));
    }
  }
  absl::StatusOr<std::vector<float>> exact = input.exact_values(candidates.indices);
  if (!exact.ok()) return exact.status();
  if (exact->size() != candidates.indices.size()) {
    return absl::InternalError(absl::StrCat("group ", input.group, " at step ", input.step, ": ", exact->size(),
                                            " exact values for ", candidates.indices.size(), " candidates"));
  }
  auto values = std::make_shared<Payload>();
  values->kind = PayloadKind::kCandidateValues;
  values->dim = candidates.dim;
  values->values = *std::move(exact);
  if (input.cap_exact_values) {
    if (absl::Status s = input.cap_exact_values(absl::MakeSpan(values->values)); !s.ok()) return s;
  }
  return std::shared_ptr<const Payload>(std::move(values));
}

void RunRound(const std::shared_ptr<Exchange>& exchange, uint32_t round, std::shared_ptr<const Payload> payload) {
  const RoundsInput& input = exchange->input;
  exchange->reducer->Reduce(
      GroupRound{input.step, input.group, round}, std::move(payload),
      [exchange, round](absl::StatusOr<RoundAnswer> answer) {
        const RoundsInput& input = exchange->input;
        if (!answer.ok()) {
          exchange->done(answer.status());
          return;
        }
        RoundsOutcome& outcome = exchange->outcome;
        outcome.bytes_sent += answer->bytes_sent;
        outcome.bytes_received += answer->bytes_received;
        outcome.spans.insert(outcome.spans.end(), answer->spans.begin(), answer->spans.end());
        if (input.low_rank != nullptr) {
          // A low-rank method: round 0 answers P^, round 1 the summed Q.
          if (round == 0) {
            absl::StatusOr<Payload> second = input.low_rank->SecondRound(answer->update);
            if (!second.ok()) {
              exchange->done(second.status());
              return;
            }
            exchange->first_answer = std::move(answer->update);
            RunRound(exchange, 1, std::make_shared<const Payload>(*std::move(second)));
            return;
          }
          absl::StatusOr<LowRankRounds::Outcome> finished =
              input.low_rank->Finish(exchange->first_answer, answer->update);
          if (!finished.ok()) {
            exchange->done(finished.status());
            return;
          }
          outcome.update = std::move(finished->update);
          outcome.kept = std::move(finished->kept);
          exchange->done(std::move(outcome));
          return;
        }
        if (round + 1 == input.rounds) {
          if (IsCandidateList(answer->update)) {
            exchange->done(absl::DataLossError(absl::StrCat(
                "group ", input.group, " at step ", input.step, ": round ", round, " answered ",
                answer->update.indices.size(), " candidates without values where the update was due")));
            return;
          }
          outcome.update = std::move(answer->update);
          exchange->done(std::move(outcome));
          return;
        }
        absl::StatusOr<std::shared_ptr<const Payload>> next = ValuesAtCandidates(input, round, answer->update);
        if (!next.ok()) {
          exchange->done(next.status());
          return;
        }
        RunRound(exchange, round + 1, *std::move(next));
      });
}

}  // namespace

ExactValuesAt ExactValuesFromHost(absl::Span<const float> encoded) {
  return [encoded](absl::Span<const uint32_t> candidates) -> absl::StatusOr<std::vector<float>> {
    std::vector<float> values;
    values.reserve(candidates.size());
    for (const uint32_t i : candidates) {
      if (i >= encoded.size()) {
        return absl::InvalidArgumentError(absl::StrCat("candidate ", i, " is outside the encoded vector of ",
                                                       encoded.size()));
      }
      values.push_back(encoded[i]);
    }
    return values;
  };
}

void ExchangeRounds(RoundReducer& reducer, RoundsInput input, RoundsDone done) {
  if (input.payload == nullptr) {
    done(absl::InvalidArgumentError(absl::StrCat("group ", input.group, " at step ", input.step, ": no payload")));
    return;
  }
  if (input.rounds < 1 || input.rounds > 2) {
    done(absl::InvalidArgumentError(absl::StrCat("group ", input.group, ": ", input.rounds,
                                                 " rounds per step; 1 or 2 are served")));
    return;
  }
  if (input.low_rank != nullptr && input.rounds != 2) {
    done(absl::InvalidArgumentError(absl::StrCat("group ", input.group, ": a low-rank method takes 2 rounds per "
                                                 "step; the run says ", input.rounds)));
    return;
  }
  if (input.rounds > 1 && !input.exact_values && input.low_rank == nullptr) {
    done(absl::InvalidArgumentError(absl::StrCat("group ", input.group, ": a later round sends the encoded vector's "
                                                 "values, and the input says not where to read them")));
    return;
  }
  auto exchange = std::make_shared<Exchange>();
  exchange->reducer = &reducer;
  std::shared_ptr<const Payload> first = input.payload;
  exchange->input = std::move(input);
  exchange->done = std::move(done);
  RunRound(exchange, 0, std::move(first));
}

}  // namespace sketchfuse
