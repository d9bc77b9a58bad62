#include "common/peel_capacity.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "common/sketch_peeling.h"

namespace sketchfuse {

uint64_t PeelNonzeros(uint64_t workers, uint64_t k, uint64_t dim) {
  if (k != 0 && workers > dim / k) return dim;
  return std::min(workers * k, dim);
}

uint64_t PeelColsFor(uint32_t rows, uint64_t nonzeros) {
  const double cells = std::max(kPeelCellsPerNonzero * static_cast<double>(nonzeros), kPeelMinCells);
  return static_cast<uint64_t>(std::ceil(cells / std::max<uint32_t>(rows, 1)));
}

PeelTrial SimulatePeel(const SketchShape& shape, uint64_t dim, uint64_t workers, uint64_t k, double overlap,
                       uint64_t seed) {
  PeelTrial trial;
  std::mt19937_64 rng(seed);
  // A random order of the coordinates: order[0, shared) are every worker's
  // common ones, and each worker takes its other k - shared from the rest.
  std::vector<uint32_t> order(dim);
  std::iota(order.begin(), order.end(), 0u);
  const uint64_t shared = static_cast<uint64_t>(std::llround(std::clamp(overlap, 0.0, 1.0) * static_cast<double>(k)));
  const uint64_t needed = std::min<uint64_t>(dim, shared + workers * (k - shared));
  for (uint64_t i = 0; i < needed; ++i) {  // a partial Fisher-Yates shuffle: the first `needed` entries
    std::uniform_int_distribution<uint64_t> pick(i, dim - 1);
    std::swap(order[i], order[pick(rng)]);
  }
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> sum(dim, 0.0f);
  absl::StatusOr<CountSketch> sketch = CountSketch::Create(shape);
  if (!sketch.ok()) return trial;
  uint64_t next = shared;
  std::vector<uint32_t> indices;
  std::vector<float> values;
  for (uint64_t worker = 0; worker < workers; ++worker) {
    indices.clear();
    values.clear();
    for (uint64_t j = 0; j < k && (j < shared || next < needed); ++j) {
      const uint32_t i = j < shared ? order[j] : order[next++];
      const float value = (normal(rng) > 0 ? 1.0f : -1.0f) * std::exp(normal(rng));
      indices.push_back(i);
      values.push_back(value);
      sum[i] += value;
    }
    (void)sketch->InsertEntries(indices, values);
  }
  float largest = 0;
  for (uint64_t j = 0; j < needed; ++j) {
    const float v = sum[order[j]];
    trial.nonzeros += v != 0.0f;
    trial.mass += std::fabs(v);
    largest = std::max(largest, std::fabs(v));
  }
  const SparseEntries got = PeelDecode(sketch->view(), dim);
  for (size_t j = 0; j < got.indices.size(); ++j) {
    const float truth = sum[got.indices[j]];
    if (truth == 0.0f) {
      ++trial.false_coordinates;
      trial.false_mass += std::fabs(got.values[j]);
    } else if (std::fabs(got.values[j] - truth) <= 1e-5f * largest) {
      ++trial.recovered;
      trial.recovered_mass += std::fabs(truth);
    } else {
      ++trial.wrong_values;
    }
  }
  return trial;
}

double ExpectedPeelRecovery(uint32_t rows, uint64_t cols, uint64_t dim, uint64_t workers, uint64_t k) {
  if (rows < 2 || cols == 0 || k == 0 || workers == 0 || dim == 0) return 0;
  // At most this many nonzeros per simulated decode; larger sums are scaled
  // down by one factor in k, cols and dim (the load and the rows stay).
  constexpr double kBudget = 16000;
  const double nonzeros = static_cast<double>(PeelNonzeros(workers, k, dim));
  const double scale = std::max(1.0, nonzeros / kBudget);
  const uint64_t sim_k = std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(static_cast<double>(k) / scale)));
  const uint64_t sim_cols = std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(static_cast<double>(cols) / scale)));
  // Selections are disjoint while workers * k fits the group; a union capped
  // at dim is simulated as dim nonzeros (every coordinate selected).
  const uint64_t sim_dim = std::max<uint64_t>(
      workers * sim_k, static_cast<uint64_t>(std::llround(static_cast<double>(dim) / scale)));
  const uint64_t sim_workers = std::min<uint64_t>(workers, sim_dim / sim_k);
  if (sim_cols > kMaxSketchCols || sim_dim >= (uint64_t{1} << 32)) return 0;
  constexpr int kTrials = 3;
  double mass = 0, recovered = 0;
  for (int t = 0; t < kTrials; ++t) {
    const SketchShape shape{rows, static_cast<uint32_t>(sim_cols), 0x5eedull * (t + 1) + 17};
    const PeelTrial trial = SimulatePeel(shape, sim_dim, sim_workers, sim_k, 0.0, 7919ull * (t + 1));
    mass += trial.mass;
    recovered += trial.recovered_mass;
  }
  return mass > 0 ? recovered / mass : 0;
}

}  // namespace sketchfuse
