// The decentralized aggregation algorithms, written against the Collective
// interface: RoundsAllreduce (the rounds of the centralized schemes over the
// collective, for every scheme whose rounds are sums) and one function for
// each scheme with a communication pattern of its own. Each takes this worker's encoded group and
// returns the update every worker applies (the SUM over workers, identical
// on every rank) and the settlement of this worker's residual (see
// worker/compression/settlement.h), which the caller applies only once the update
// is applied.
//
// Conservation: with error feedback, for every algorithm but one-round
// sketching with method=estimate, the updates applied plus the residuals of
// all workers equal the sum of all gradients (up to float rounding): what a
// worker does not send, or receives and does not forward, goes back into its
// own residual. A peeled sketch (method=peel) applies the exact sums of what
// the workers inserted, and each releases only its own inserted coordinates
// that came back. A one-round method=estimate sketch applies estimates of the
// sum, and each worker releases its own residual at the chosen coordinates
// (Sketched-SGD); its second round replaces the estimates by the exact sums.
//
// Every rank must call the same algorithm for the same group in the same
// order (the collectives match by order). Errors are the collective's
// (UNAVAILABLE, DEADLINE_EXCEEDED), DATA_LOSS for a malformed message from a
// peer, INVALID_ARGUMENT for an input that does not fit.
#ifndef SKETCHFUSE_WORKER_DECENTRALIZED_ALGORITHMS_H_
#define SKETCHFUSE_WORKER_DECENTRALIZED_ALGORITHMS_H_

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/compressor.h"
#include "common/payload.h"
#include "common/round_finish.h"
#include "worker/collective/collective.h"
#include "worker/compression/settlement.h"
#include "worker/rounds/exchange_rounds.h"

namespace sketchfuse {

struct GroupInput {
  uint64_t step = 0;
  int group = 0;
  // This worker's payload of the group (Compressor::Encode's output).
  const Payload* payload = nullptr;
  // The vector that was encoded (the residual under error feedback), dim
  // values, in host memory: the start of SparDL's reduction, the values
  // importance pruning sums. Empty for groups kept on the GPU.
  absl::Span<const float> encoded;
  // RoundsAllreduce's later round: where this worker's exact values at the
  // candidates are read (GroupCompressors::ExactValuesAt: the host residual,
  // or a gather on the GPU). Required with more than one round.
  ExactValuesAt exact_values;
  // Coordinates to select (gtopk, SparDL, importance pruning) and what a
  // capped later round releases at most (cap_exact_values).
  uint64_t k = 0;
  // Rounds per step (RoundsAllreduce): 2 with an exact round 1 at round
  // 0's candidates (the estimate sketch's --second_round, the fixed-size
  // sketch).
  uint32_t rounds = 1;
  // The final round keeps this many of its largest sums (0: all); the
  // group's GroupConfig::reselect_top_k, as the shards read it
  // (FinalRoundTopK in worker/schemes/scheme_registry.h).
  uint64_t reselect_top_k = 0;
  // RoundsAllreduce: decodes round 0's sum (the group's compressor's
  // decode, on the host or, on a GPU worker, on the device; or the step of
  // the method's state where the sum is), taking the sum over.
  RoundDecoder decode;
  // RoundsAllreduce's later round: scales this worker's exact values at the
  // candidates before they are sent (GroupCompressors::CapExactValues with
  // k), so that the settlement keeps the unsent part, where the run caps
  // releases (the two-round schemes; a no-op for the optional second
  // round, which CapsRelease leaves uncapped); unset: the values go whole.
  std::function<absl::Status(absl::Span<float>)> cap_exact_values;
  // RoundsAllreduce for a low-rank method (PowerSGD): its worker-side rounds
  // (not owned; GroupCompressors::low_rank) and the check of its factor
  // values (the group's Compressor::CheckFactorRound).
  LowRankRounds* low_rank = nullptr;
  FactorRoundCheck factor_check;
};

struct GroupOutcome {
  Update update;
  Settlement settlement;
  // Time spent decoding locally (RoundsAllreduce), for the timeline.
  absl::Duration decode_time;
};

// The dense allreduce with bfloat16 values on the wire and float32 accumulation
// (worker/decentralized/bf16_ring.h): a ring reduce-scatter and allgather
// over point-to-point exchanges, half the bytes of dense_allreduce's. The update
// is within P * 2^-8 of the sum of magnitudes per element of the exact sum
// (typically within one bfloat16 rounding), identical on every rank;
// releases everything (the rounding error is not fed back).
absl::StatusOr<GroupOutcome> DenseAllreduceBf16(Collective& collective, const GroupInput& input);

// The rounds algorithm of the centralized schemes (worker/rounds/
// exchange_rounds.h) over the collective (rounds_allreduce.cc), with a
// CollectiveReducer in place of the shards: dense_allreduce (one allreduce
// of the dense payload), topk_allgather (one allgather of every rank's
// (index, value) pairs, summed in rank order: their union), sketch_allreduce
// and fixed_sketch_allreduce. Round 0 sums the payloads and every rank
// finishes the sum with input.decode (the compressor's decode: a copy for
// dense and sparse sums; the peel, the estimate sketch, or a method's state
// where the sum is); with two rounds (the estimate sketch's --second_round,
// the fixed-size sketch) every rank decoded the same candidates, and round
// 1 allreduces the exact encoded values there, without indices, capped by
// input.cap_exact_values, keeping the top input.reselect_top_k of the sums
// where that is set (fixed_sketch_allreduce). Settles by SettleExchange: a
// rank releases what it sent and was applied (every coordinate of a dense
// payload; its own sparse indices, all in the union; its inserted
// coordinates that came back), or after an exact round every applied
// coordinate. The fixed-size sketch's bytes per worker do not depend on the
// number of ranks (two dense allreduces of rows * cols and p * k floats).
// A low-rank method (powersgd_allreduce, input.low_rank) allreduces its P
// factors, every rank orthonormalizes them, then allreduces its Q factors,
// and settles by what its own factors missed (SettleLowRank).
absl::StatusOr<GroupOutcome> RoundsAllreduce(Collective& collective, const GroupInput& input);

// gTop-k: in round j (gap 2^j) rank r with r mod 2^(j+1) == 2^j sends its set
// to r - 2^j, which sums it into its own and keeps the top k; rank 0
// broadcasts the result. What was not selected stays in its owner's
// residual: a rank releases (and masks the velocity at) its own coordinates
// that the result holds, and gives back the shares of those coordinates that
// it dropped (its own or received) on the way.
absl::StatusOr<GroupOutcome> GTopK(Collective& collective, const GroupInput& input);

// Importance-weighted pruning on allreduce: every rank names its payload's
// indices (its k largest |g|/|w|) in an allgather; every rank allreduces its
// exact encoded values at their union and releases them. (Cheng & Xu have
// one rank, chosen anew each step, broadcast its k indices; that held each
// rank's own important coordinates back until its turn: worker/README.md.)
absl::StatusOr<GroupOutcome> ImportanceAllreduce(Collective& collective, const GroupInput& input);

// SparDL on the largest power of two P2 <= P ranks (each further rank first
// hands its top k to rank r - P2): Spar-Reduce-Scatter by recursive halving
// over P2 blocks, sending the top k/P2 per block of the half given away and
// adding what arrives; then each rank's top k/P2 of its own block, and
// Spar-All-Gather of those. Global residual collection: everything a rank
// neither sent nor contributed stays in its residual, received values
// included.
absl::StatusOr<GroupOutcome> SparDL(Collective& collective, const GroupInput& input);

// The signature every algorithm has.
using DecentralizedFn = absl::StatusOr<GroupOutcome> (*)(Collective&, const GroupInput&);

// The message tag of round `round` of (step, group) for point-to-point steps.
uint32_t PointToPointTag(uint64_t step, int group, int round);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_DECENTRALIZED_ALGORITHMS_H_
