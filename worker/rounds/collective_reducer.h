// The decentralized reducer: each round's payloads are summed among the
// workers by an allreduce (an allgather for sparse payloads) over the
// Collective (Gloo, NCCL, in-process, the
// PyTorch hook's), and every worker finishes the round itself by the rule
// the shards use (common/round_finish.h): the same bits on every worker,
// since each finishes the same allreduced sum.
#ifndef SKETCHFUSE_WORKER_ROUNDS_COLLECTIVE_REDUCER_H_
#define SKETCHFUSE_WORKER_ROUNDS_COLLECTIVE_REDUCER_H_

#include <memory>
#include <optional>

#include "common/round_finish.h"
#include "worker/collective/collective.h"
#include "worker/rounds/round_reducer.h"

namespace sketchfuse {

// Reduces the rounds of one group's exchange (one step): it keeps each
// round's answer, whose candidates place the next round's values.
class CollectiveReducer final : public RoundReducer {
 public:
  // `collective` (not owned) must outlive the reducer; `decode` finishes
  // round 0's sum (the group's decoder, or its method's state where the sum
  // is); `factor_check`, for a low-rank method (the group's
  // Compressor::CheckFactorRound), accepts its factor values: its round 0's
  // and, after round 0's dense answer, its later rounds'.
  CollectiveReducer(Collective& collective, RoundRule rule, RoundDecoder decode,
                    FactorRoundCheck factor_check = nullptr);

  // Answers before returning. Sums dense and sketch payloads (round 0) and
  // candidate values (later rounds) with one allreduce of their values, and
  // sparse payloads (round 0) with one allgather of their (index, value)
  // pairs, added in rank order, and a low-rank method's factor values with
  // one allreduce (none for no values); INVALID_ARGUMENT for another kind,
  // for a round out of order, or for candidate values that do not match the
  // previous answer.
  void Reduce(const GroupRound& round, std::shared_ptr<const Payload> payload, RoundDone done) override;

 private:
  // The sum over the ranks of this rank's payload `mine`.
  absl::StatusOr<Payload> Sum(const Payload& mine);

  Collective& collective_;
  const RoundRule rule_;
  const RoundDecoder decode_;
  const FactorRoundCheck factor_check_;
  uint32_t next_round_ = 0;
  std::optional<Update> previous_answer_;  // the last round's, for the next
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_ROUNDS_COLLECTIVE_REDUCER_H_
