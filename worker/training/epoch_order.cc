#include "worker/training/epoch_order.h"

#include <algorithm>
#include <numeric>
#include <random>

namespace sketchfuse {

std::vector<int64_t> EpochOrder(uint64_t seed, int rank, int64_t epoch, int64_t n) {
  std::vector<int64_t> order(static_cast<size_t>(std::max<int64_t>(n, 0)));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed * 1000003ull + static_cast<uint64_t>(rank) * 7919ull + static_cast<uint64_t>(epoch));
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

}  // namespace sketchfuse
