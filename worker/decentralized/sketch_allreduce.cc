#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "worker/decentralized/algorithms.h"
#include "worker/decentralized/input_checks.h"

namespace sketchfuse {

absl::StatusOr<GroupOutcome> SketchAllreduce(Collective& collective, const GroupInput& input) {
  if (absl::Status s = decentralized_internal::CheckInput(input, PayloadKind::kSketch, input.rounds > 1);
      !s.ok()) {
    return s;
  }
  if (!input.decode) return absl::InvalidArgumentError("sketch_allreduce needs the group's decoder");
  // Sketches are linear: the allreduced table is the sketch of the sum.
  Payload sum = *input.payload;
  if (absl::Status s = collective.AllReduceSum(absl::MakeSpan(sum.values)); !s.ok()) return s;
  const absl::Time decode_start = absl::Now();
  absl::StatusOr<Update> decoded = input.decode(sum);
  const absl::Duration decode_time = absl::Now() - decode_start;
  if (!decoded.ok()) return decoded.status();
  GroupOutcome outcome;
  outcome.update = *std::move(decoded);
  outcome.decode_time = decode_time;
  if (outcome.update.dense) return absl::InternalError("a sketch decoded to a dense update");
  if (input.rounds > 1) {
    // Every rank decoded the same indices from the same bits: the exact sum
    // of the encoded values there replaces the estimates.
    for (size_t j = 0; j < outcome.update.indices.size(); ++j) {
      outcome.update.values[j] = input.encoded[outcome.update.indices[j]];
    }
    if (absl::Status s = collective.AllReduceSum(absl::MakeSpan(outcome.update.values)); !s.ok()) return s;
  }
  // Without a second round a worker releases what it inserted and got back
  // (all of the update for a sketch of the whole group); with one, every
  // worker's exact values at the update's coordinates were summed: the rule
  // the centralized route settles by too.
  outcome.settlement = SettleExchange(*input.payload, outcome.update, input.rounds);
  return outcome;
}

}  // namespace sketchfuse
