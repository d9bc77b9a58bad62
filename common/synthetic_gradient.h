// Synthetic gradients and backward timings with a real model's layer sizes,
// for throughput work where training the model itself is beside the point.
//
// Values: each layer l has a scale s_l = exp(U(-2, 2)) (layers differ by up to
// ~50x in magnitude, as real gradients do) and heavy-tailed entries
// s_l * Laplace(1). Timings: backward of a layer takes overhead + n * per_element
// seconds. Everything is deterministic in the seed.
#ifndef SKETCHFUSE_COMMON_SYNTHETIC_GRADIENT_H_
#define SKETCHFUSE_COMMON_SYNTHETIC_GRADIENT_H_

#include <cstdint>
#include <vector>

#include "common/fusion_planner.h"
#include "common/model_profiles.h"

namespace sketchfuse {

// The model's gradient flattened in BACKWARD order (the layer produced first
// comes first), so fused groups are contiguous ranges of it.
std::vector<float> SyntheticGradient(const ModelProfile& model, uint64_t seed);

// Per-layer timings in backward order: overhead_seconds + n * seconds_per_element.
std::vector<LayerTiming> SyntheticLayerTimings(const ModelProfile& model,
                                               double seconds_per_element,
                                               double overhead_seconds);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_SYNTHETIC_GRADIENT_H_
