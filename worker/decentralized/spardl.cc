#include "absl/strings/str_cat.h"
#include "worker/decentralized/algorithms.h"
#include "worker/decentralized/input_checks.h"
#include "worker/decentralized/sparse_set.h"

namespace sketchfuse {
namespace {

// held[i] += received values, which must lie in [begin, end).
absl::Status AddInto(const Update& received, uint64_t begin, uint64_t end, std::vector<float>* held) {
  for (size_t j = 0; j < received.indices.size(); ++j) {
    const uint32_t i = received.indices[j];
    if (i < begin || i >= end) {
      return absl::DataLossError(
          absl::StrCat("a peer sent index ", i, " outside the blocks [", begin, ", ", end, ") this rank keeps"));
    }
    (*held)[i] += received.values[j];
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GroupOutcome> SparDL(Collective& collective, const GroupInput& input) {
  if (absl::Status s = decentralized_internal::CheckInput(input, PayloadKind::kSparse, true); !s.ok()) return s;
  const uint64_t dim = input.payload->dim;
  const int size = collective.size(), rank = collective.rank();
  int p2 = 1;
  while (2 * p2 <= size) p2 *= 2;
  // Entries kept per block: the group's k spread over the P2 blocks.
  const uint64_t per_block = std::max<uint64_t>(1, (input.k + p2 - 1) / p2);
  auto block_begin = [&](uint64_t block) { return block * dim / static_cast<uint64_t>(p2); };

  std::vector<float> held(input.encoded.begin(), input.encoded.end());
  Update contribution = EmptySparse(dim);
  if (rank >= p2) {
    // A rank beyond the power of two hands its top k to its partner and
    // keeps the rest.
    Update handed = TakeTopK(absl::MakeSpan(held), 0, dim, input.k);
    if (absl::Status s = collective.Send(SerializeSparse(handed), rank - p2, PointToPointTag(input.step, input.group, 0));
        !s.ok()) {
      return s;
    }
  } else {
    if (rank + p2 < size) {
      absl::StatusOr<std::string> message = collective.Recv(rank + p2, PointToPointTag(input.step, input.group, 0));
      if (!message.ok()) return message.status();
      absl::StatusOr<Update> received = ParseSparse(*message, dim);
      if (!received.ok()) return received.status();
      if (absl::Status s = AddInto(*received, 0, dim, &held); !s.ok()) return s;
    }
    // Spar-Reduce-Scatter: recursive halving of the block range [lo, lo + 2d).
    uint64_t lo = 0;
    int round = 1;
    for (int d = p2 / 2; d >= 1; d /= 2, ++round) {
      const int partner = rank ^ d;
      const bool upper = (rank & d) != 0;
      const uint64_t keep = upper ? lo + d : lo, give = upper ? lo : lo + d;
      Update sent = TakeTopK(absl::MakeSpan(held), block_begin(give), block_begin(give + d), per_block * d);
      absl::StatusOr<std::string> message = collective.SendRecv(SerializeSparse(sent), partner, partner,
                                                                PointToPointTag(input.step, input.group, round));
      if (!message.ok()) return message.status();
      absl::StatusOr<Update> received = ParseSparse(*message, dim);
      if (!received.ok()) return received.status();
      if (absl::Status s = AddInto(*received, block_begin(keep), block_begin(keep + d), &held); !s.ok()) return s;
      lo = keep;
    }
    contribution = TakeTopK(absl::MakeSpan(held), block_begin(rank), block_begin(rank + 1), per_block);
  }

  // Spar-All-Gather: the blocks are disjoint, so the sum is their union.
  std::vector<uint32_t> words;
  std::vector<size_t> counts;
  if (absl::Status s = collective.AllGatherV(PackWords(contribution), &words, &counts); !s.ok()) return s;
  absl::StatusOr<Update> global = SumPackedSets(words, counts, dim);
  if (!global.ok()) return global.status();

  GroupOutcome outcome;
  outcome.update = *std::move(global);
  // Global residual collection: the residual becomes what this rank holds.
  outcome.settlement.release = Coordinates::All(dim);
  outcome.settlement.give_back.dense = true;
  outcome.settlement.give_back.dim = dim;
  outcome.settlement.give_back.values = std::move(held);
  outcome.settlement.velocity_mask = Coordinates::Of(outcome.update);
  return outcome;
}

}  // namespace sketchfuse
