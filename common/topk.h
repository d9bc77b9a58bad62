// Exact top-k selection by magnitude, the selection every SketchFuse decode uses.
//
// Order: entries are ranked by MagnitudeKey(x) descending, then by index
// ascending. MagnitudeKey is |x| as ordered bits, so the order is total and
// identical on every platform (the GPU kernels use the same key): +0 and -0 tie,
// +inf ranks above every finite value and NaN above +inf, so a non-finite
// gradient is selected and surfaces instead of hiding in a residual.
//
// The fast path samples the keys to guess a threshold, collects the few
// candidates at or above it in one pass, and selects among them; its result is
// always exactly the reference result (a full sort by the order above).
#ifndef SKETCHFUSE_COMMON_TOPK_H_
#define SKETCHFUSE_COMMON_TOPK_H_

#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/types/span.h"

namespace sketchfuse {

// |x| as an unsigned integer that orders like |x| (NaN above +inf).
inline uint32_t MagnitudeKey(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits & 0x7FFFFFFFu;
}

// A selected coordinate and its key, used between the selection stages.
struct KeyedIndex {
  uint32_t key;
  uint32_t index;
};

// Indices of the min(k, x.size()) entries of `x` that rank first by the order
// in the file comment, returned in ascending index order. x.size() must be
// below 2^32.
std::vector<uint32_t> TopKIndices(absl::Span<const float> x, uint64_t k);

// Same selection over precomputed keys (e.g. importance scores turned into
// keys with MagnitudeKey).
std::vector<uint32_t> TopKIndicesByKey(absl::Span<const uint32_t> keys, uint64_t k);

// The reference: sort every index by the order, keep the first k, sort them by
// index. O(n log n); used by tests and as the fallback of the fast paths.
std::vector<uint32_t> TopKIndicesReference(absl::Span<const float> x, uint64_t k);

namespace topk_internal {

// A key threshold such that, with high probability, at least k of n keys
// (of which `sample` is a uniform sample) are at or above it, and not many more.
// `attempt` > 0 lowers the threshold geometrically after a failed attempt;
// the threshold reaches 0 (everything passes) after a few attempts.
uint32_t ThresholdFromSample(std::vector<uint32_t> sample, uint64_t n, uint64_t k,
                             int attempt);

// Keeps the k best of `candidates` by (key descending, index ascending) and
// returns their indices in ascending order. Candidates must have distinct
// indices.
std::vector<uint32_t> SelectBest(std::vector<KeyedIndex> candidates, uint64_t k);

// Deterministic sample positions in [0, n): position j is a hash of j.
uint64_t SamplePosition(uint64_t j, uint64_t n);

// Size of the sample used to pick thresholds for n elements.
uint64_t SampleSize(uint64_t n);

}  // namespace topk_internal
}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_TOPK_H_
