// dense_bf16_allreduce: the dense ring with bfloat16 values on the wire and
// float32 accumulation (bf16_ring.h).
#include "worker/decentralized/algorithms.h"
#include "worker/decentralized/bf16_ring.h"
#include "worker/decentralized/input_checks.h"

namespace sketchfuse {

absl::StatusOr<GroupOutcome> DenseAllreduceBf16(Collective& collective, const GroupInput& input) {
  if (absl::Status s = decentralized_internal::CheckInput(input, PayloadKind::kDense, false); !s.ok()) return s;
  GroupOutcome outcome;
  outcome.update.dense = true;
  outcome.update.dim = input.payload->dim;
  outcome.update.values = input.payload->values;
  if (absl::Status s = RingAllReduceSumBf16(collective, absl::MakeSpan(outcome.update.values),
                                            [&](int round) { return PointToPointTag(input.step, input.group, round); });
      !s.ok()) {
    return s;
  }
  outcome.settlement = decentralized_internal::Release(outcome.update);
  return outcome;
}

}  // namespace sketchfuse
