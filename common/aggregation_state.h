// State an aggregation method keeps where the sum is: on the shard that owns
// a group (centralized route), or on every worker alike (decentralized
// route, where each decodes the same allreduced sum). FetchSGD's momentum and
// error sketches are the one such method today (common/fetchsgd_state.h).
//
// The method owns it and nothing else looks inside: a compressor creates it
// (Compressor::NewAggregationState), the holder of the sum steps it with
// each round's sum in place of Compressor::Decode, and journals and
// checkpoints it as an opaque vector of floats (Save / Restore). Neither
// server/ nor worker/schemes/ names the method.
//
// Contract:
//  - Step(sum) folds one step's summed payload in and returns that step's
//    update; it is called once per step, in step order. On an error the
//    state is unchanged.
//  - Save() then Restore() on a state of the same group gives back a state
//    that steps identically; Restore refuses (INVALID_ARGUMENT, state
//    unchanged) a vector of another size or with a non-finite value.
//  - A method with such state has one round per step (no exact second
//    round) and its workers keep no error feedback or momentum of their
//    own: the state is where both live.
//
// NOTE: not thread-safe; one instance per group, stepped in step order.
#ifndef SKETCHFUSE_COMMON_AGGREGATION_STATE_H_
#define SKETCHFUSE_COMMON_AGGREGATION_STATE_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/payload.h"

namespace sketchfuse {

class AggregationState {
 public:
  virtual ~AggregationState() = default;

  // An independent copy (a restore is tried on a copy, then kept).
  virtual std::unique_ptr<AggregationState> Clone() const = 0;

  // The step's update for the step's summed payload; advances the state.
  virtual absl::StatusOr<Update> Step(const Payload& sum) = 0;

  // The state as floats, for journals and checkpoints, and its restoration.
  virtual std::vector<float> Save() const = 0;
  virtual absl::Status Restore(absl::Span<const float> saved) = 0;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_AGGREGATION_STATE_H_
