#include "common/topk.h"

#include <algorithm>
#include <cmath>

#include "common/sketch_hash.h"

namespace sketchfuse {
namespace topk_internal {

uint64_t SampleSize(uint64_t n) { return std::min<uint64_t>(n, 1u << 16); }

uint64_t SamplePosition(uint64_t j, uint64_t n) {
  // Multiply-shift range reduction of a well-mixed 64-bit value.
  const uint64_t r = SplitMix64(0x5EEDull, j) >> 32;
  return (r * n) >> 32;
}

uint32_t ThresholdFromSample(std::vector<uint32_t> sample, uint64_t n, uint64_t k,
                             int attempt) {
  const uint64_t s = sample.size();
  if (s == 0 || k >= n) return 0;
  // Expected number of sampled keys among the top k, plus a margin of four
  // standard deviations so that the candidate set rarely falls short; each
  // retry doubles the rank.
  const double expected = static_cast<double>(s) * static_cast<double>(k) / n;
  double rank = expected + 4.0 * std::sqrt(expected) + 4.0;
  rank *= std::pow(4.0, attempt);
  if (rank >= static_cast<double>(s)) return 0;
  const uint64_t r = static_cast<uint64_t>(rank);
  std::nth_element(sample.begin(), sample.begin() + r, sample.end(),
                   [](uint32_t a, uint32_t b) { return a > b; });
  return sample[r];
}

std::vector<uint32_t> SelectBest(std::vector<KeyedIndex> candidates, uint64_t k) {
  auto better = [](const KeyedIndex& a, const KeyedIndex& b) {
    return a.key != b.key ? a.key > b.key : a.index < b.index;
  };
  if (k < candidates.size()) {
    std::nth_element(candidates.begin(), candidates.begin() + k, candidates.end(),
                     better);
    candidates.resize(k);
  }
  std::vector<uint32_t> indices(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) indices[i] = candidates[i].index;
  std::sort(indices.begin(), indices.end());
  return indices;
}

}  // namespace topk_internal

namespace {



// Block width of the candidate scan: the maximum of a block is a vectorized
// reduction, and only blocks that reach the threshold are scanned element by
// element.
constexpr size_t kScanBlock = 64;

template <typename KeyFn>
void CollectAtLeast(size_t n, uint32_t threshold, KeyFn key_of,
                    std::vector<KeyedIndex>* out) {
  size_t begin = 0;
  for (; begin + kScanBlock <= n; begin += kScanBlock) {
    uint32_t block_max = 0;
    for (size_t i = begin; i < begin + kScanBlock; ++i) {
      block_max = std::max(block_max, key_of(i));
    }
    if (block_max < threshold) continue;
    for (size_t i = begin; i < begin + kScanBlock; ++i) {
      const uint32_t key = key_of(i);
      if (key >= threshold) out->push_back({key, static_cast<uint32_t>(i)});
    }
  }
  for (size_t i = begin; i < n; ++i) {
    const uint32_t key = key_of(i);
    if (key >= threshold) out->push_back({key, static_cast<uint32_t>(i)});
  }
}

template <typename KeyFn>
std::vector<uint32_t> TopKImpl(size_t n, uint64_t k, KeyFn key_of) {
  if (k == 0 || n == 0) return {};
  if (k >= n) {
    std::vector<uint32_t> all(n);
    for (size_t i = 0; i < n; ++i) all[i] = static_cast<uint32_t>(i);
    return all;
  }
  const uint64_t s = topk_internal::SampleSize(n);
  std::vector<uint32_t> sample(s);
  for (uint64_t j = 0; j < s; ++j) {
    sample[j] = key_of(topk_internal::SamplePosition(j, n));
  }
  std::vector<KeyedIndex> candidates;
  for (int attempt = 0;; ++attempt) {
    const uint32_t threshold = topk_internal::ThresholdFromSample(sample, n, k, attempt);
    candidates.clear();
    CollectAtLeast(n, threshold, key_of, &candidates);
    // Every key at or above the threshold is a candidate, so if there are at
    // least k of them the k best overall are among them.
    if (candidates.size() >= k) break;
  }
  return topk_internal::SelectBest(std::move(candidates), k);
}

}  // namespace

std::vector<uint32_t> TopKIndices(absl::Span<const float> x, uint64_t k) {
  const float* data = x.data();
  return TopKImpl(x.size(), k, [data](size_t i) { return MagnitudeKey(data[i]); });
}

std::vector<uint32_t> TopKIndicesByKey(absl::Span<const uint32_t> keys, uint64_t k) {
  const uint32_t* data = keys.data();
  return TopKImpl(keys.size(), k, [data](size_t i) { return data[i]; });
}

std::vector<uint32_t> TopKIndicesReference(absl::Span<const float> x, uint64_t k) {
  std::vector<uint32_t> order(x.size());
  for (size_t i = 0; i < x.size(); ++i) order[i] = static_cast<uint32_t>(i);
  std::sort(order.begin(), order.end(), [&x](uint32_t a, uint32_t b) {
    const uint32_t ka = MagnitudeKey(x[a]), kb = MagnitudeKey(x[b]);
    return ka != kb ? ka > kb : a < b;
  });
  order.resize(std::min<uint64_t>(k, order.size()));
  std::sort(order.begin(), order.end());
  return order;
}

}  // namespace sketchfuse
