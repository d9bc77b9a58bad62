// threshold: Deep Gradient Compression's sampled threshold. The magnitude of
// the k_s-th largest element of a random sample (k_s = k * sample size / dim)
// is the threshold; every element at or above it is sent, so about k are.
// When more than 2k pass (a skewed sample), the exact top-k of those is sent,
// as DGC's hierarchical selection does.
// Parameters: density (default 0.001) or k; sample, the sampled fraction
// (default 0.01, at least 1000 elements); seed (default 1).
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/compressors/builtin.h"
#include "common/compressors/selection.h"
#include "common/sketch_hash.h"
#include "common/topk.h"

namespace sketchfuse {
namespace {

class ThresholdCompressor final : public SparseCompressor {
 public:
  ThresholdCompressor(SelectionParams selection, double sample_fraction, uint64_t seed)
      : selection_(selection), sample_fraction_(sample_fraction), seed_(seed) {}

  std::string spec() const override {
    return absl::StrCat("threshold:", selection_.ToString(), ",sample=", sample_fraction_,
                        ",seed=", seed_);
  }
  bool linear() const override { return false; }

  absl::StatusOr<Payload> Encode(absl::Span<const float> grad,
                                 const EncodeContext& context) override {
    absl::Status size = CheckGroupSize(grad.size());
    if (!size.ok()) return size;
    const uint64_t n = grad.size();
    const uint64_t k = selection_.For(n);
    const uint64_t s = std::min<uint64_t>(
        n, std::max<uint64_t>(1000, static_cast<uint64_t>(std::ceil(sample_fraction_ * n))));
    // Sample with replacement, positions from (seed, step).
    const uint64_t stream = SplitMix64(seed_, context.step);
    std::vector<uint32_t> sample(s);
    for (uint64_t j = 0; j < s; ++j) {
      sample[j] = MagnitudeKey(grad[((SplitMix64(stream, j) >> 32) * n) >> 32]);
    }
    const uint64_t rank = std::min<uint64_t>(
        s - 1, static_cast<uint64_t>(std::ceil(static_cast<double>(k) * s / n)) - 1);
    std::nth_element(sample.begin(), sample.begin() + rank, sample.end(),
                     [](uint32_t a, uint32_t b) { return a > b; });
    const uint32_t threshold = sample[rank];

    std::vector<uint32_t> indices;
    for (uint64_t i = 0; i < n; ++i) {
      if (MagnitudeKey(grad[i]) >= threshold) indices.push_back(static_cast<uint32_t>(i));
    }
    if (indices.size() > 2 * k) {
      std::vector<KeyedIndex> candidates(indices.size());
      for (size_t j = 0; j < indices.size(); ++j) {
        candidates[j] = {MagnitudeKey(grad[indices[j]]), indices[j]};
      }
      indices = topk_internal::SelectBest(std::move(candidates), k);
    }
    return GatherSparse(grad, std::move(indices));
  }

 protected:
  // What passes the sampled threshold, cut to the top k when over 2k.
  uint64_t MostEntries(uint64_t dim) const override { return std::min<uint64_t>(dim, 2 * selection_.For(dim)); }

 private:
  SelectionParams selection_;
  double sample_fraction_;
  uint64_t seed_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Compressor>> MakeThresholdCompressor(ParamReader& params) {
  absl::StatusOr<SelectionParams> selection = ReadSelection(params);
  if (!selection.ok()) return selection.status();
  absl::StatusOr<double> sample = params.Double("sample", 0.01, 1e-6, 1.0);
  if (!sample.ok()) return sample.status();
  absl::StatusOr<uint64_t> seed = params.Uint("seed", 1, 0, UINT64_MAX);
  if (!seed.ok()) return seed.status();
  return std::unique_ptr<Compressor>(new ThresholdCompressor(*selection, *sample, *seed));
}

}  // namespace sketchfuse
