// The compressed exchange of one group, written once against a RoundReducer
// (round_reducer.h): the algorithm of sketch_ps and sketch_allreduce (the
// peel, a method's state where the sum is, the exact second round), of the
// two-round fixed-size sketch (fixed_sketch_ps, fixed_sketch_allreduce), of
// the hybrids on either route, and of topk_ps and dense_ps. Bound to a
// ShardReducer it is a centralized scheme; bound to a CollectiveReducer the
// decentralized one, as NCCL binds one ring algorithm to its primitives.
//
//   round 0   this worker's encoded payload is reduced; the answer is the
//             update (one round), or the candidates of the next round;
//   low rank  a low-rank method (PowerSGD; input.low_rank) sends its
//             factors instead: round 1 carries SecondRound of round 0's
//             answer, and Finish turns both answers into the update and
//             what the worker keeps (RoundsOutcome::kept);
//   round r   this worker's exact values at round r - 1's candidates (the
//             encoded vector there, read where it lives: host memory, or
//             gathered on the GPU; under the release cap where the run caps
//             it), in the candidates' order and without indices, are
//             reduced; the final round's answer is the exact sums (their
//             top k where the group re-selects).
//
// The update is the SUM over the job's workers; what a worker settles once
// it is applied is SettleExchange's rule (worker/compression/settlement.h).
#ifndef SKETCHFUSE_WORKER_ROUNDS_EXCHANGE_ROUNDS_H_
#define SKETCHFUSE_WORKER_ROUNDS_EXCHANGE_ROUNDS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/compressor.h"
#include "common/payload.h"
#include "worker/core/trace_span.h"
#include "worker/rounds/round_reducer.h"

namespace sketchfuse {

// This worker's exact values at `candidates` (each below the group's dim): the encoded vector there, in the candidates' order.
// INVALID_ARGUMENT for a candidate outside the vector; the placement's
// errors (a failed device copy).
using ExactValuesAt = std::function<absl::StatusOr<std::vector<float>>(absl::Span<const uint32_t> candidates)>;

// ExactValuesAt over a vector in host memory, which must outlive the
// function's calls.
ExactValuesAt ExactValuesFromHost(absl::Span<const float> encoded);

struct RoundsInput {
  uint64_t step = 0;
  int group = 0;
  // Rounds per step (RoundsPerStep of the run): 1 or 2.
  uint32_t rounds = 1;
  // This worker's encoded payload of the group: round 0's contribution.
  std::shared_ptr<const Payload> payload;
  // Where later rounds read this worker's values at the candidates: the
  // vector that was encoded (the residual under error feedback,
  // GroupCompressors::ExactValuesAt), which must stay put until `done` has
  // run (a residual does until its update is applied); unused with one
  // round.
  ExactValuesAt exact_values;
  // Scales this worker's exact values before a later round sends them
  // (GroupCompressors::CapExactValues with the group's k); may be empty.
  std::function<absl::Status(absl::Span<float>)> cap_exact_values;
  // A low-rank method's rounds (not owned; GroupCompressors::low_rank), in
  // place of exact_values: round 1 sends low_rank->SecondRound of round 0's
  // answer, and the update is low_rank->Finish of both answers.
  LowRankRounds* low_rank = nullptr;
};

struct RoundsOutcome {
  Update update;  // the final round's answer (a low-rank method's: its Finish)
  // A low-rank method's: what this worker keeps of the vector it encoded
  // (SettleLowRank settles by it).
  std::optional<std::vector<float>> kept;
  size_t bytes_sent = 0;
  size_t bytes_received = 0;
  std::vector<TraceSpan> spans;  // every round's, in order
};

using RoundsDone = std::function<void(absl::StatusOr<RoundsOutcome>)>;

// Runs `input`'s rounds over `reducer` (which must outlive the exchange);
// `done` runs exactly once, on the thread of the reducer's last answer
// (before ExchangeRounds returns where the reducer answers inline, as a
// collective does). Errors: the reducer's; INVALID_ARGUMENT for an input
// without a payload or, with two rounds, without exact_values; INTERNAL when
// round 0's answer cannot start the next round (dense, another dim, a
// candidate out of range) or exact_values answers another
// number of values; exact_values' errors; DATA_LOSS when the final answer is
// a candidate list (values due).
void ExchangeRounds(RoundReducer& reducer, RoundsInput input, RoundsDone done);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_ROUNDS_EXCHANGE_ROUNDS_H_
