// What a worker keeps for one fused group between steps, by name: the state
// a checkpoint saves and a restarted worker restores
// (AggregationScheme::SaveState, worker/training/trainer.cc, the PyTorch
// hook's state_dict).
#ifndef SKETCHFUSE_WORKER_COMPRESSION_GROUP_STATE_H_
#define SKETCHFUSE_WORKER_COMPRESSION_GROUP_STATE_H_

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

  bool operator==(const GroupState& o) const {
    return residual == o.residual && velocity == o.velocity && method_state == o.method_state;
  }
  bool operator!=(const GroupState& o) const { return !(*this == o); }
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_COMPRESSION_GROUP_STATE_H_
