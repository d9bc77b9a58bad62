// dense_allreduce, topk_allgather, sketch_allreduce, fixed_sketch_allreduce
// and the hybrids' fallback: the rounds algorithm of the centralized schemes
// (worker/rounds/exchange_rounds.h) bound to the workers' collective instead
// of the shards (worker/rounds/collective_reducer.h). The dense sum, the
// union of the workers' top k, the peel, the estimate sketch and its exact
// second round, FetchSGD's state where the sum is (stepped by input.decode
// on every worker), and the two-round fixed-size sketch (its candidates
// decoded by every rank from the same allreduced table, the exact values
// there allreduced without indices, the top k of their sums applied) are
// all this one exchange; what differs is the payload and the group's rule,
// read from the job as the shards read it.
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/decentralized/algorithms.h"
#include "worker/decentralized/input_checks.h"
#include "worker/rounds/collective_reducer.h"
#include "worker/rounds/exchange_rounds.h"

namespace sketchfuse {

absl::StatusOr<GroupOutcome> RoundsAllreduce(Collective& collective, const GroupInput& input) {
  if (input.payload == nullptr) return absl::InvalidArgumentError("no payload");
  const PayloadKind kind = input.payload->kind;
  const bool low_rank = input.low_rank != nullptr && kind == PayloadKind::kCandidateValues;
  if (!low_rank && kind != PayloadKind::kDense && kind != PayloadKind::kSparse && kind != PayloadKind::kSketch) {
    return absl::InvalidArgumentError(
        absl::StrCat("this scheme sums dense, sparse and sketch payloads, not ", PayloadKindName(kind)));
  }
  if (absl::Status s = decentralized_internal::CheckInput(input, kind, /*needs_encoded=*/false); !s.ok()) return s;
  if (input.rounds > 1 && !input.exact_values && !low_rank) {
    return absl::InvalidArgumentError("a later round needs this worker's exact values (exact_values)");
  }
  if (!input.decode) return absl::InvalidArgumentError("the rounds need the group's decoder");
  CollectiveReducer reducer(collective, RoundRule{input.rounds, input.reselect_top_k}, input.decode,
                            low_rank ? input.factor_check : nullptr);
  RoundsInput rounds;
  rounds.step = input.step;
  rounds.group = input.group;
  rounds.rounds = input.rounds;
  // Not owned: the exchange ends before this function returns.
  rounds.payload = std::shared_ptr<const Payload>(std::shared_ptr<const Payload>(), input.payload);
  rounds.exact_values = input.exact_values;
  rounds.cap_exact_values = input.cap_exact_values;
  if (low_rank) rounds.low_rank = input.low_rank;
  absl::StatusOr<RoundsOutcome> exchanged = absl::InternalError("the collective did not answer inline");
  ExchangeRounds(reducer, std::move(rounds),
                 [&exchanged](absl::StatusOr<RoundsOutcome> outcome) { exchanged = std::move(outcome); });
  if (!exchanged.ok()) return exchanged.status();
  GroupOutcome outcome;
  for (const TraceSpan& span : exchanged->spans) {
    if (span.name == "decode") outcome.decode_time += span.end - span.begin;
  }
  outcome.update = std::move(exchanged->update);
  // The rule the centralized route settles by too.
  outcome.settlement = exchanged->kept.has_value() ? SettleLowRank(*std::move(exchanged->kept))
                                                   : SettleExchange(*input.payload, outcome.update, input.rounds);
  return outcome;
}

}  // namespace sketchfuse
