// Test data shared by the unit tests: reproducible random vectors.
#ifndef SKETCHFUSE_COMMON_TEST_VECTORS_H_
#define SKETCHFUSE_COMMON_TEST_VECTORS_H_

#include <cstdint>
#include <random>
#include <vector>

namespace sketchfuse {

// n samples of Normal(0, stddev^2) from std::mt19937 seeded with `seed`: the
// same vector for the same arguments on every run.
inline std::vector<float> GaussianVector(size_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_TEST_VECTORS_H_
