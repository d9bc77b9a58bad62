// Sparse sets of (index, value) pairs as the decentralized schemes move and
// merge them. A sparse set is an Update with dense == false: strictly
// ascending indices below dim, one value each.
#ifndef SKETCHFUSE_WORKER_DECENTRALIZED_SPARSE_SET_H_
#define SKETCHFUSE_WORKER_DECENTRALIZED_SPARSE_SET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/payload.h"

namespace sketchfuse {

// An empty sparse set of a group of `dim` elements.
Update EmptySparse(uint64_t dim);

// a + b: the union of the indices, values summed where both have one
// (a's value first). Both must be sparse sets of the same dim.
Update SumSparse(const Update& a, const Update& b);

// Keeps the k entries of `set` that rank first by magnitude (common/topk.h's
// order: |value| descending, then index ascending) and moves the others into
// *dropped (summed into it, which must be of the same dim).
void KeepTopK(uint64_t k, Update* set, Update* dropped);

// The up to `k` entries of x[begin, end) that rank first by magnitude,
// skipping zeros, as a sparse set over x; they are zeroed in x.
Update TakeTopK(absl::Span<float> x, uint64_t begin, uint64_t end, uint64_t k);

// Wire form for point-to-point messages: count, indices, values.
std::string SerializeSparse(const Update& set);
// DATA_LOSS naming the fault for bytes that are not a sparse set of `dim`
// elements (a short or long message, indices out of order or range).
absl::StatusOr<Update> ParseSparse(absl::string_view bytes, uint64_t dim);

// Word form for allgathers: the indices, then the values' bits.
std::vector<uint32_t> PackWords(const Update& set);
// The sum of the sets a word allgather returned (`counts[r]` words from rank
// r), added in rank order so every rank computes the same bits. DATA_LOSS
// for blocks that are not sparse sets of `dim` elements.
absl::StatusOr<Update> SumPackedSets(absl::Span<const uint32_t> words, const std::vector<size_t>& counts,
                                     uint64_t dim);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_DECENTRALIZED_SPARSE_SET_H_
