#include "worker/decentralized/algorithms.h"
#include "worker/decentralized/input_checks.h"
#include "worker/decentralized/sparse_set.h"

namespace sketchfuse {

absl::StatusOr<GroupOutcome> TopKAllgather(Collective& collective, const GroupInput& input) {
  if (absl::Status s = decentralized_internal::CheckInput(input, PayloadKind::kSparse, false); !s.ok()) return s;
  Update own = EmptySparse(input.payload->dim);
  own.indices = input.payload->indices;
  own.values = input.payload->values;
  std::vector<uint32_t> words;
  std::vector<size_t> counts;
  if (absl::Status s = collective.AllGatherV(PackWords(own), &words, &counts); !s.ok()) return s;
  absl::StatusOr<Update> sum = SumPackedSets(words, counts, own.dim);
  if (!sum.ok()) return sum.status();
  GroupOutcome outcome;
  outcome.update = *std::move(sum);
  // Everything this worker sent is in the update: release exactly that.
  outcome.settlement = decentralized_internal::Release(own);
  return outcome;
}

}  // namespace sketchfuse
