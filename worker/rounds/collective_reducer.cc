#include "worker/rounds/collective_reducer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "worker/decentralized/sparse_set.h"

namespace sketchfuse {

CollectiveReducer::CollectiveReducer(Collective& collective, RoundRule rule, RoundDecoder decode,
                                     FactorRoundCheck factor_check)
    : collective_(collective), rule_(rule), decode_(std::move(decode)), factor_check_(std::move(factor_check)) {}

absl::StatusOr<Payload> CollectiveReducer::Sum(const Payload& mine) {
  if (mine.kind == PayloadKind::kSparse) {
    // A sparse payload is not linear in its layout: every rank's (index,
    // value) pairs are gathered in one allgather and summed in rank order,
    // the union the shard's merge makes (the same bits on every rank).
    Update own = EmptySparse(mine.dim);
    own.indices = mine.indices;
    own.values = mine.values;
    std::vector<uint32_t> words;
    std::vector<size_t> counts;
    if (absl::Status s = collective_.AllGatherV(PackWords(own), &words, &counts); !s.ok()) return s;
    absl::StatusOr<Update> union_sum = SumPackedSets(words, counts, mine.dim);
    if (!union_sum.ok()) return union_sum.status();
    Payload sum;
    sum.kind = PayloadKind::kSparse;
    sum.dim = mine.dim;
    sum.indices = std::move(union_sum->indices);
    sum.values = std::move(union_sum->values);
    return sum;
  }
  // Dense payloads, sketch tables and values at shared candidates are
  // linear: the allreduced values are the payload of the sum.
  Payload sum = mine;
  sum.inserted.reset();  // this worker's own record, not the sum's
  if (sum.values.empty()) return sum;  // a factor round without factors: nothing to sum
  if (absl::Status s = collective_.AllReduceSum(absl::MakeSpan(sum.values)); !s.ok()) return s;
  return sum;
}

void CollectiveReducer::Reduce(const GroupRound& round, std::shared_ptr<const Payload> payload, RoundDone done) {
  if (payload == nullptr) {
    done(absl::InvalidArgumentError(absl::StrCat("round ", round.round, " of group ", round.group, ": no payload")));
    return;
  }
  if (round.round != next_round_) {
    done(absl::InvalidArgumentError(absl::StrCat("round ", round.round, " of group ", round.group, " out of order; ",
                                                 "round ", next_round_, " is next")));
    return;
  }
  const bool first = round.round == 0;
  const bool summable = first ? payload->kind == PayloadKind::kDense || payload->kind == PayloadKind::kSketch ||
                                    payload->kind == PayloadKind::kSparse ||
                                    (factor_check_ && payload->kind == PayloadKind::kCandidateValues)
                              : payload->kind == PayloadKind::kCandidateValues;
  if (!summable) {
    done(absl::InvalidArgumentError(absl::StrCat("round ", round.round, " of group ", round.group, ": a ",
                                                 PayloadKindName(payload->kind), " payload is not summed here")));
    return;
  }
  if (!first && previous_answer_.has_value() && previous_answer_->dense) {
    // A low-rank method's factor values, checked before communicating.
    absl::Status fits = factor_check_ ? factor_check_(round.round, *payload)
                                      : absl::InvalidArgumentError("no method takes factor values here");
    if (!fits.ok()) {
      done(absl::InvalidArgumentError(absl::StrCat("round ", round.round, " of group ", round.group, ": ",
                                                   fits.message())));
      return;
    }
  } else if (!first) {
    // Checked before communicating: a misfit must not enter the allreduce.
    if (!previous_answer_.has_value() || previous_answer_->dense ||
        previous_answer_->indices.size() != payload->values.size()) {
      done(absl::InvalidArgumentError(absl::StrCat(
          "round ", round.round, " of group ", round.group, ": ", payload->values.size(), " values for ",
          previous_answer_.has_value() ? previous_answer_->indices.size() : 0, " candidates of the previous round")));
      return;
    }
  }
  const uint64_t sent_before = collective_.bytes_sent();
  const uint64_t received_before = collective_.bytes_received();
  const absl::Time start = absl::Now();
  absl::StatusOr<Payload> summed_payload = Sum(*payload);
  payload.reset();
  if (!summed_payload.ok()) {
    done(summed_payload.status());
    return;
  }
  Payload sum = *std::move(summed_payload);
  const absl::Time summed = absl::Now();
  if (!first) {
    if (absl::Status s = PrepareLaterRound(*previous_answer_, round.round, factor_check_, &sum); !s.ok()) {
      done(absl::InvalidArgumentError(absl::StrCat("round ", round.round, " of group ", round.group, ": ", s.message())));
      return;
    }
  }
  absl::StatusOr<Update> finished = FinishRound(rule_, round.round, std::move(sum), decode_);
  const absl::Time end = absl::Now();
  if (!finished.ok()) {
    done(finished.status());
    return;
  }
  ++next_round_;
  // The candidates of the next round, if one follows.
  if (next_round_ < rule_.rounds) {
    previous_answer_ = *finished;
  } else {
    previous_answer_.reset();
  }
  RoundAnswer answer;
  answer.update = *std::move(finished);
  answer.bytes_sent = collective_.bytes_sent() - sent_before;
  answer.bytes_received = collective_.bytes_received() - received_before;
  answer.spans.push_back({"communicate", start, summed});
  if (first) answer.spans.push_back({"decode", summed, end});
  done(std::move(answer));
}

}  // namespace sketchfuse
