#include "absl/strings/str_cat.h"
#include "worker/decentralized/algorithms.h"
#include "worker/decentralized/input_checks.h"

namespace sketchfuse {

absl::StatusOr<GroupOutcome> ImportanceAllreduce(Collective& collective, const GroupInput& input) {
  if (absl::Status s = decentralized_internal::CheckInput(input, PayloadKind::kSparse, true); !s.ok()) return s;
  const uint64_t dim = input.payload->dim;
  // The rank whose important indices everyone uses this step.
  const int root = static_cast<int>(input.step % static_cast<uint64_t>(collective.size()));
  uint32_t count = collective.rank() == root ? static_cast<uint32_t>(input.payload->indices.size()) : 0;
  if (absl::Status s = collective.Broadcast(absl::MakeSpan(&count, 1), root); !s.ok()) return s;
  if (count > dim) return absl::DataLossError(absl::StrCat("rank ", root, " announced ", count, " indices of ", dim));
  std::vector<uint32_t> indices =
      collective.rank() == root ? input.payload->indices : std::vector<uint32_t>(count);
  if (absl::Status s = collective.Broadcast(absl::MakeSpan(indices), root); !s.ok()) return s;
  GroupOutcome outcome;
  outcome.update.dim = dim;
  outcome.update.values.reserve(count);
  for (size_t j = 0; j < indices.size(); ++j) {
    if (indices[j] >= dim || (j > 0 && indices[j] <= indices[j - 1])) {
      return absl::DataLossError(absl::StrCat("rank ", root, "'s index ", j, " = ", indices[j],
                                              " is out of order or beyond the group's ", dim));
    }
    outcome.update.values.push_back(input.encoded[indices[j]]);
  }
  outcome.update.indices = std::move(indices);
  if (absl::Status s = collective.AllReduceSum(absl::MakeSpan(outcome.update.values)); !s.ok()) return s;
  // Every rank sent its exact values at these indices.
  outcome.settlement = decentralized_internal::Release(outcome.update);
  return outcome;
}

}  // namespace sketchfuse
