// randomk: k coordinates drawn uniformly without replacement from a stream
// seeded by (seed, step). Every worker draws the same indices for the same
// step and group size, so payloads of different workers align and their
// merge is a plain sum: the compressor is linear. Unbiased only with error
// feedback (values are not rescaled by dim / k).
// Parameters: density (default 0.001) or k; seed (default 1).
#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/compressors/builtin.h"
#include "common/compressors/selection.h"
#include "common/sketch_hash.h"

namespace sketchfuse {
namespace {

// Robert Floyd's sampling of k distinct values of [0, n), sorted.
std::vector<uint32_t> SampleIndices(uint64_t n, uint64_t k, uint64_t seed, uint64_t step) {
  const uint64_t stream_seed = SplitMix64(seed, step);
  absl::flat_hash_set<uint32_t> chosen;
  chosen.reserve(k);
  uint64_t draw = 0;
  for (uint64_t j = n - k; j < n; ++j) {
    // Uniform in [0, j] by multiply-shift of 32 random bits (bias < j / 2^32).
    const uint64_t r = SplitMix64(stream_seed, draw++) >> 32;
    const uint32_t t = static_cast<uint32_t>((r * (j + 1)) >> 32);
    if (!chosen.insert(t).second) chosen.insert(static_cast<uint32_t>(j));
  }
  std::vector<uint32_t> indices(chosen.begin(), chosen.end());
  std::sort(indices.begin(), indices.end());
  return indices;
}

class RandomKCompressor final : public SparseCompressor {
 public:
  RandomKCompressor(SelectionParams selection, uint64_t seed)
      : selection_(selection), seed_(seed) {}

  std::string spec() const override {
    return absl::StrCat("randomk:", selection_.ToString(), ",seed=", seed_);
  }
  bool linear() const override { return true; }

  absl::StatusOr<Payload> Encode(absl::Span<const float> grad,
                                 const EncodeContext& context) override {
    absl::Status size = CheckGroupSize(grad.size());
    if (!size.ok()) return size;
    return GatherSparse(grad, SampleIndices(grad.size(), selection_.For(grad.size()), seed_,
                                            context.step));
  }

 protected:
  uint64_t MostEntries(uint64_t dim) const override { return selection_.For(dim); }

 private:
  SelectionParams selection_;
  uint64_t seed_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Compressor>> MakeRandomKCompressor(ParamReader& params) {
  absl::StatusOr<SelectionParams> selection = ReadSelection(params);
  if (!selection.ok()) return selection.status();
  absl::StatusOr<uint64_t> seed = params.Uint("seed", 1, 0, UINT64_MAX);
  if (!seed.ok()) return seed.status();
  return std::unique_ptr<Compressor>(new RandomKCompressor(*selection, *seed));
}

}  // namespace sketchfuse
