// How a round of a group's exchange finishes where its sum is: on the
// aggregation shard that owns the group (server/aggregation_core.h), or on
// every worker once the workers' collective has summed it
// (worker/rounds/collective_reducer.h). One rule for both routes, so a
// method's rounds end the same, to the bit, whichever route sums them.
//
// A group takes `rounds` rounds per step (1 or 2), numbered from 0:
//   round 0      the workers' encoded payloads (dense, sparse, sketch);
//                their sum is decoded by the group's decoder (the
//                compressor's decode, or the step of the method's state
//                where the sum is: common/aggregation_state.h);
//   round r > 0  every worker's exact values at round r - 1's candidates,
//                placed there (PlaceAtCandidates); their sum is the update.
//                After a dense answer (a low-rank method's factor:
//                LowRankRounds in common/compressor.h), every worker's factor
//                values instead, summed as they are (PrepareLaterRound
//                checks their count); the answer is their dense sum, which
//                each worker turns into its update.
// The final round's answer keeps only its `reselect_top_k` largest-magnitude
// entries where that is set (Top-k PS's re-selection of the union, the
// two-round fixed-size sketch's top k of the exact sums); a round before the
// final one answers with a candidate list: its indices without values
// (IsCandidateList, common/error_feedback.h), all the next round needs.
#ifndef SKETCHFUSE_COMMON_ROUND_FINISH_H_
#define SKETCHFUSE_COMMON_ROUND_FINISH_H_

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/payload.h"

namespace sketchfuse {

// What a group's rounds are, as every worker and shard of its job reads them
// from the job config (GroupConfig::reselect_top_k, RoundsPerStep).
struct RoundRule {
  uint32_t rounds = 1;
  uint64_t reselect_top_k = 0;  // 0: the final round keeps every entry
};

// Decodes round 0's sum into its update (may consume the payload).
using RoundDecoder = std::function<absl::StatusOr<Update>(Payload sum)>;

// The answer of round `round` given the sum of its workers' payloads (for
// round > 0, payloads already placed at the candidates: a sparse payload).
// `decode` is called for round 0 only. INVALID_ARGUMENT for a round outside
// the rule, or a later round whose sum is not sparse; the decoder's error
// otherwise.
absl::StatusOr<Update> FinishRound(const RoundRule& rule, uint32_t round, Payload sum, const RoundDecoder& decode);

// Keeps the `k` largest-magnitude entries of a sparse update (ties: the lower
// index; common/topk.h), in ascending index order. A dense update, or one of
// at most k entries, is left as it is.
void ReselectTopK(uint64_t k, Update* update);

// Places a worker's values of a later round (PayloadKind::kCandidateValues:
// one value per candidate, in the candidates' order, no indices) at the
// previous round's `candidates`: on OK *payload is the sparse payload of
// those values there. INVALID_ARGUMENT when the previous answer is not a
// sparse list of candidates, the payload is not candidate values, or the
// counts differ (the message says which).
absl::Status PlaceAtCandidates(const Update& candidates, Payload* payload);

// Checks a later round's push against the method (the group's
// Compressor::CheckFactorRound).
using FactorRoundCheck = std::function<absl::Status(uint32_t round, const Payload& payload)>;

// Makes round `round`'s (>= 1) push ready to sum given the previous round's
// answer: placed at its candidates (a sparse answer: PlaceAtCandidates), or,
// after a dense answer, left as factor values that `check` accepts.
// INVALID_ARGUMENT naming the misfit.
absl::Status PrepareLaterRound(const Update& previous, uint32_t round, const FactorRoundCheck& check,
                               Payload* payload);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_ROUND_FINISH_H_
