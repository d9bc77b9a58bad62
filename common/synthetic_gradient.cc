#include "common/synthetic_gradient.h"

#include <cmath>

#include "common/sketch_hash.h"

namespace sketchfuse {
namespace {

// Uniform in (0, 1) from 53 bits of a SplitMix64 stream.
double Uniform(uint64_t seed, uint64_t i) {
  return (static_cast<double>(SplitMix64(seed, i) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

}  // namespace

std::vector<float> SyntheticGradient(const ModelProfile& model, uint64_t seed) {
  std::vector<float> grad(static_cast<size_t>(model.TotalElements()));
  size_t offset = 0;
  uint64_t layer = 0;
  for (const TensorSpec& t : model.BackwardOrder()) {
    const double scale = std::exp(4.0 * Uniform(seed ^ 0xA5A5A5A5ull, layer) - 2.0);
    const uint64_t stream = SplitMix64(seed, 1000003ull * (layer + 1));
    for (int64_t j = 0; j < t.num_elements; ++j) {
      const uint64_t bits = SplitMix64(stream, j);
      // Laplace(1): sign from one bit, magnitude -log(u) from the others.
      const double u = (static_cast<double>(bits >> 12) + 0.5) * (1.0 / 4503599627370496.0);
      const double magnitude = -std::log(u) * scale;
      grad[offset + j] = static_cast<float>((bits & 1) ? -magnitude : magnitude);
    }
    offset += t.num_elements;
    ++layer;
  }
  return grad;
}

std::vector<LayerTiming> SyntheticLayerTimings(const ModelProfile& model,
                                               double seconds_per_element,
                                               double overhead_seconds) {
  std::vector<LayerTiming> layers;
  for (const TensorSpec& t : model.BackwardOrder()) {
    layers.push_back({t.num_elements, overhead_seconds + t.num_elements * seconds_per_element});
  }
  return layers;
}

}  // namespace sketchfuse
