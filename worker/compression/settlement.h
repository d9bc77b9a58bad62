// What a worker's compression state gives up once a step's update is
// applied: the coordinates of its residual the update carried, the values a
// decentralized scheme received and did not forward, and where the velocity
// is masked. Every scheme's algorithm returns one; GroupCompressors::Settle
// applies it.
#ifndef SKETCHFUSE_WORKER_COMPRESSION_SETTLEMENT_H_
#define SKETCHFUSE_WORKER_COMPRESSION_SETTLEMENT_H_

#include <cstdint>

#include "common/error_feedback.h"
#include "common/payload.h"

namespace sketchfuse {

// How one step changes a group's state once its update is applied.
struct Settlement {
  // Coordinates of this worker's residual that the update carried: zeroed.
  Coordinates release;
  // Values given back to the residual afterwards (dense or sparse; empty
  // sparse: none): received from peers and not forwarded.
  Update give_back;
  // Coordinates where the velocity is zeroed (momentum-factor masking).
  Coordinates velocity_mask;
};

// Release and mask every coordinate of `update`: for a worker whose payload
// held all of them (a dense payload, a sketch of the whole group, a second
// round that summed every worker's exact values there).
Settlement SettleAt(const Update& update);

// Release and mask the coordinates of `update` that this worker's payload
// `sent` carried: a sparse payload's indices, a selective sketch's inserted
// coordinates (Payload::inserted), or every coordinate for a dense payload
// and a sketch of the whole group. A worker thus keeps in its residual what
// it never sent, even where another worker's value was applied (Top-k PS
// unions, peeled sketches), and what it sent but was not applied.
Settlement SettleSent(const Payload& sent, const Update& update);

// The settlement of an exchange of `rounds` rounds per step in which this
// worker sent `sent` first, on either route (the one rule for sketch_ps,
// topk_ps, dense_ps, sketch_allreduce and the hybrid): after an exact last
// round (rounds > 1) every worker's exact values at the update's
// coordinates were summed, so all of them are released (SettleAt); after
// one round, what this worker sent and was applied (SettleSent).
Settlement SettleExchange(const Payload& sent, const Update& update, uint32_t rounds);

// The settlement of a low-rank method's step (LowRankRounds::Finish): the
// residual becomes `kept` (what this worker's own factors missed; the
// group's dim), and the velocity is masked everywhere.
Settlement SettleLowRank(std::vector<float> kept);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_COMPRESSION_SETTLEMENT_H_
