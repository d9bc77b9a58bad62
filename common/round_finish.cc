#include "common/round_finish.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/topk.h"

namespace sketchfuse {

void ReselectTopK(uint64_t k, Update* update) {
  if (update->dense || update->indices.size() <= k) return;
  const std::vector<uint32_t> keep = TopKIndices(update->values, k);  // ascending positions
  std::vector<uint32_t> indices(keep.size());
  std::vector<float> values(keep.size());
  for (size_t j = 0; j < keep.size(); ++j) {
    indices[j] = update->indices[keep[j]];
    values[j] = update->values[keep[j]];
  }
  update->indices = std::move(indices);
  update->values = std::move(values);
}

absl::Status PlaceAtCandidates(const Update& candidates, Payload* payload) {
  if (payload->kind != PayloadKind::kCandidateValues) {
    return absl::InvalidArgumentError(absl::StrCat("a later round takes candidate values; got a ",
                                                   PayloadKindName(payload->kind), " payload"));
  }
  if (candidates.dense || payload->values.size() != candidates.indices.size()) {
    return absl::InvalidArgumentError(absl::StrCat("a later round's push must carry one value for each of the ",
                                                   candidates.indices.size(), " candidates; got ",
                                                   payload->values.size()));
  }
  payload->kind = PayloadKind::kSparse;
  payload->dim = candidates.dim;
  payload->indices = candidates.indices;
  return absl::OkStatus();
}

absl::Status PrepareLaterRound(const Update& previous, uint32_t round, const FactorRoundCheck& check,
                               Payload* payload) {
  if (!previous.dense) return PlaceAtCandidates(previous, payload);
  if (!check) return absl::InvalidArgumentError("a round after a dense answer needs the method's factor check");
  return check(round, *payload);
}

absl::StatusOr<Update> FinishRound(const RoundRule& rule, uint32_t round, Payload sum, const RoundDecoder& decode) {
  if (round >= rule.rounds) {
    return absl::InvalidArgumentError(absl::StrCat("round ", round, " of a group of ", rule.rounds, " round(s)"));
  }
  absl::StatusOr<Update> update;
  if (round > 0 && sum.kind == PayloadKind::kCandidateValues) {
    // Factor values (after a dense answer): their sum, dense.
    Update factors;
    factors.dense = true;
    factors.dim = sum.values.size();
    factors.values = std::move(sum.values);
    update = std::move(factors);
  } else if (round > 0) {
    // Every worker's values sat at the same candidates: their sum is the
    // exact update there.
    if (sum.kind != PayloadKind::kSparse) {
      return absl::InvalidArgumentError(absl::StrCat("round ", round, " sums values placed at candidates; got a ",
                                                     PayloadKindName(sum.kind), " payload"));
    }
    Update exact;
    exact.dim = sum.dim;
    exact.indices = std::move(sum.indices);
    exact.values = std::move(sum.values);
    update = std::move(exact);
  } else {
    update = decode(std::move(sum));
  }
  if (!update.ok()) return update;
  if (round + 1 == rule.rounds) {
    if (rule.reselect_top_k > 0) ReselectTopK(rule.reselect_top_k, &*update);
  } else if (!update->dense) {
    // The next round needs only the indices: the estimates do not travel.
    update->values.clear();
  }
  return update;
}

}  // namespace sketchfuse
