// What a worker's compression state gives up once a step's update is
// applied: the coordinates of its residual the update carried, the values a
// decentralized scheme received and did not forward, and where the velocity
// is masked. Every scheme's algorithm returns one; GroupCompressors::Settle
// applies it.
#ifndef SKETCHFUSE_WORKER_COMPRESSION_SETTLEMENT_H_
#define SKETCHFUSE_WORKER_COMPRESSION_SETTLEMENT_H_

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

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_COMPRESSION_SETTLEMENT_H_
