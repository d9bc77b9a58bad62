#include "absl/strings/str_cat.h"
#include "worker/decentralized/algorithms.h"
#include "worker/decentralized/input_checks.h"
#include "worker/decentralized/sparse_set.h"

namespace sketchfuse {
namespace {

// The entries of sparse set `set` whose index is in `indices` (ascending).
Update RestrictTo(const Update& set, const std::vector<uint32_t>& indices) {
  Update kept = EmptySparse(set.dim);
  size_t j = 0;
  for (size_t p = 0; p < set.indices.size(); ++p) {
    while (j < indices.size() && indices[j] < set.indices[p]) ++j;
    if (j == indices.size()) break;
    if (indices[j] == set.indices[p]) {
      kept.indices.push_back(set.indices[p]);
      kept.values.push_back(set.values[p]);
    }
  }
  return kept;
}

}  // namespace

absl::StatusOr<GroupOutcome> GTopK(Collective& collective, const GroupInput& input) {
  if (absl::Status s = decentralized_internal::CheckInput(input, PayloadKind::kSparse, false); !s.ok()) return s;
  const uint64_t dim = input.payload->dim;
  const int size = collective.size(), rank = collective.rank();
  Update own = EmptySparse(dim);
  own.indices = input.payload->indices;
  own.values = input.payload->values;
  Update held = own, dropped = EmptySparse(dim);

  // The tree reduction towards rank 0.
  int round = 0;
  for (int gap = 1; gap < size; gap <<= 1, ++round) {
    const uint32_t tag = PointToPointTag(input.step, input.group, round);
    if (rank % (2 * gap) == gap) {
      if (absl::Status s = collective.Send(SerializeSparse(held), rank - gap, tag); !s.ok()) return s;
      held = EmptySparse(dim);
      break;
    }
    if (rank + gap < size) {
      absl::StatusOr<std::string> message = collective.Recv(rank + gap, tag);
      if (!message.ok()) return message.status();
      absl::StatusOr<Update> received = ParseSparse(*message, dim);
      if (!received.ok()) return received.status();
      held = SumSparse(held, *received);
      KeepTopK(input.k, &held, &dropped);
    }
  }

  // Rank 0 broadcasts the global top-k: its size, then its words.
  uint32_t count = rank == 0 ? static_cast<uint32_t>(held.indices.size()) : 0;
  if (absl::Status s = collective.Broadcast(absl::MakeSpan(&count, 1), 0); !s.ok()) return s;
  if (count > dim) return absl::DataLossError(absl::StrCat("rank 0 announced ", count, " entries of ", dim));
  std::vector<uint32_t> words = rank == 0 ? PackWords(held) : std::vector<uint32_t>(2 * size_t{count});
  if (absl::Status s = collective.Broadcast(absl::MakeSpan(words), 0); !s.ok()) return s;
  absl::StatusOr<Update> global = SumPackedSets(words, {words.size()}, dim);
  if (!global.ok()) return global.status();

  GroupOutcome outcome;
  outcome.update = *std::move(global);
  // What was not selected stays where it was: this rank releases (and masks
  // the velocity of) only its own coordinates that the global top-k holds.
  // At those coordinates every owner releases its value, so a share of it
  // that a merge dropped on the way comes back to the rank that dropped it;
  // dropped shares at other coordinates are still in their owners'
  // residuals. So the update plus every residual still equals every
  // gradient. (Giving everything dropped to the dropping rank, as before,
  // also conserved, but it zeroed the owners' residuals and velocities at
  // coordinates that were never applied and piled other ranks' values onto
  // the merging ranks; worker/README.md.)
  outcome.settlement.release = Coordinates::Of(RestrictTo(own, outcome.update.indices));
  outcome.settlement.velocity_mask = outcome.settlement.release;
  outcome.settlement.give_back = RestrictTo(dropped, outcome.update.indices);
  return outcome;
}

}  // namespace sketchfuse
