// What a worker keeps for one fused group between steps, by name: the state
// a checkpoint saves and a restarted worker restores
// (AggregationScheme::SaveState, worker/training/trainer.cc, the PyTorch
// hook's state_dict).
#ifndef SKETCHFUSE_WORKER_COMPRESSION_GROUP_STATE_H_
#define SKETCHFUSE_WORKER_COMPRESSION_GROUP_STATE_H_

#include <cstdint>
#include <vector>

namespace sketchfuse {

struct GroupState {
  // Error feedback's residual: what this worker encoded and was not applied
  // yet (the group's dim values); empty when the run keeps none.
  std::vector<float> residual;
  // Momentum correction's velocity (dim values); empty when the run keeps
  // none (a dense scheme's momentum is the optimizer's).
  std::vector<float> velocity;
  // The aggregation method's own state where the sum is, opaque to the
  // worker: FetchSGD's momentum and error sketches, which every worker of
  // sketch_allreduce holds alike (common/fetchsgd_state.h Save). Empty for
  // methods without one.
  std::vector<float> method_state;
  // Adam's moments kept on the worker (common/adam_moments.h): the first and
  // second moment (dim values each) and the encodes they have seen; empty
  // and 0 when the run keeps none (Adam on the aggregated update).
  std::vector<float> first_moment;
  std::vector<float> second_moment;
  uint64_t moment_steps = 0;

  bool operator==(const GroupState& o) const {
    return residual == o.residual && velocity == o.velocity && method_state == o.method_state &&
           first_moment == o.first_moment && second_moment == o.second_moment && moment_steps == o.moment_steps;
  }
  bool operator!=(const GroupState& o) const { return !(*this == o); }
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_COMPRESSION_GROUP_STATE_H_
