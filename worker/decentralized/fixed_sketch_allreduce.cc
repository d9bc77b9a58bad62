// fixed_sketch_allreduce: a two-round sketch whose bytes per worker do not
// depend on the number of workers (ALGORITHMS.md, gs-SGD and ARC-Top-k; the
// scale-out issue).
//
//   Round 1: every worker's sketch of its whole (momentum-corrected)
//     residual, hashed with the step's seed into a table of a fixed shape
//     (count_sketch method=candidates), is summed by a dense allreduce.
//   Decode: every rank decodes the same candidates from the same sum: the
//     p * k coordinates whose estimates rank first.
//   Round 2: the workers' exact residual values at the candidates, in the
//     candidates' order and without indices, are summed by a dense allreduce.
//   Apply: the k candidates whose exact sums are largest in magnitude, with
//     those sums. Every worker releases there what it sent: its residual, or
//     under the release cap the scaled part (the settlement keeps the rest),
//     so error feedback conserves the gradient exactly.
//
// Bytes per worker per step: two dense allreduces of rows * cols and p * k
// floats, whatever the number of workers (a ring sends and receives
// 2 (W - 1) / W of each).
#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/topk.h"
#include "worker/decentralized/algorithms.h"
#include "worker/decentralized/input_checks.h"

namespace sketchfuse {

absl::StatusOr<GroupOutcome> FixedSketchAllreduce(Collective& collective, const GroupInput& input) {
  if (absl::Status s = decentralized_internal::CheckInput(input, PayloadKind::kSketch, /*needs_encoded=*/true);
      !s.ok()) {
    return s;
  }
  if (!input.decode) return absl::InvalidArgumentError("fixed_sketch_allreduce needs the group's decoder");
  if (input.k == 0) return absl::InvalidArgumentError("fixed_sketch_allreduce needs k > 0");
  // Round 1: the tables are linear, so their sum is the sketch of the sum.
  Payload sum = *input.payload;
  if (absl::Status s = collective.AllReduceSum(absl::MakeSpan(sum.values)); !s.ok()) return s;
  const absl::Time decode_start = absl::Now();
  absl::StatusOr<Update> candidates = input.decode(sum);
  absl::Duration decode_time = absl::Now() - decode_start;
  if (!candidates.ok()) return candidates.status();
  if (candidates->dense) return absl::InternalError("a sketch decoded to a dense update");
  for (const uint32_t index : candidates->indices) {
    if (index >= input.encoded.size()) {
      return absl::InternalError(absl::StrCat("candidate ", index, " is outside the group of ", input.encoded.size()));
    }
  }
  // Round 2: the exact sums at the candidates (every rank decoded the same
  // indices from the same bits, so the values line up without indices).
  std::vector<float> exact(candidates->indices.size());
  for (size_t j = 0; j < exact.size(); ++j) exact[j] = input.encoded[candidates->indices[j]];
  if (input.cap_exact_values) {
    if (absl::Status s = input.cap_exact_values(absl::MakeSpan(exact)); !s.ok()) return s;
  }
  if (absl::Status s = collective.AllReduceSum(absl::MakeSpan(exact)); !s.ok()) return s;
  // The top k of the exact sums, in ascending index order.
  const absl::Time select_start = absl::Now();
  std::vector<uint32_t> chosen = TopKIndices(exact, std::min<uint64_t>(input.k, exact.size()));
  std::sort(chosen.begin(), chosen.end());  // positions in the ascending candidates: ascending indices
  GroupOutcome outcome;
  outcome.update.dim = input.payload->dim;
  outcome.update.indices.reserve(chosen.size());
  outcome.update.values.reserve(chosen.size());
  for (const uint32_t position : chosen) {
    outcome.update.indices.push_back(candidates->indices[position]);
    outcome.update.values.push_back(exact[position]);
  }
  decode_time += absl::Now() - select_start;
  outcome.decode_time = decode_time;
  // What every worker sent at the applied coordinates was summed.
  outcome.settlement = decentralized_internal::Release(outcome.update);
  return outcome;
}

}  // namespace sketchfuse
