#include <algorithm>

#include "absl/strings/str_cat.h"
#include "worker/decentralized/algorithms.h"
#include "worker/decentralized/input_checks.h"

namespace sketchfuse {

absl::StatusOr<GroupOutcome> ImportanceAllreduce(Collective& collective, const GroupInput& input) {
  if (absl::Status s = decentralized_internal::CheckInput(input, PayloadKind::kSparse, true); !s.ok()) return s;
  const uint64_t dim = input.payload->dim;
  // Every rank names its important indices; the same union on every rank.
  std::vector<uint32_t> named;
  std::vector<size_t> counts;
  if (absl::Status s = collective.AllGatherV(input.payload->indices, &named, &counts); !s.ok()) return s;
  size_t offset = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    if (offset + counts[r] > named.size()) {
      return absl::DataLossError(absl::StrCat("rank ", r, " named ", counts[r], " indices; only ",
                                              named.size() - offset, " arrived"));
    }
    for (size_t j = offset; j < offset + counts[r]; ++j) {
      if (named[j] >= dim || (j > offset && named[j] <= named[j - 1])) {
        return absl::DataLossError(absl::StrCat("rank ", r, "'s index ", j - offset, " = ", named[j],
                                                " is out of order or beyond the group's ", dim));
      }
    }
    offset += counts[r];
  }
  std::sort(named.begin(), named.end());
  named.erase(std::unique(named.begin(), named.end()), named.end());

  GroupOutcome outcome;
  outcome.update.dim = dim;
  outcome.update.values.reserve(named.size());
  for (uint32_t i : named) outcome.update.values.push_back(input.encoded[i]);
  outcome.update.indices = std::move(named);
  if (absl::Status s = collective.AllReduceSum(absl::MakeSpan(outcome.update.values)); !s.ok()) return s;
  // Every rank sent its exact values at these indices.
  outcome.settlement = decentralized_internal::Release(outcome.update);
  return outcome;
}

}  // namespace sketchfuse
