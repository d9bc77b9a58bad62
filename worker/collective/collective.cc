#include "worker/collective/collective.h"

namespace sketchfuse {

uint64_t RingAllReduceBytes(uint64_t elements, int size) {
  if (size <= 1) return 0;
  return 2 * (static_cast<uint64_t>(size) - 1) * elements * 4 / static_cast<uint64_t>(size);
}

uint64_t RingAllGatherBytes(const std::vector<size_t>& counts, int rank) {
  const int size = static_cast<int>(counts.size());
  if (size <= 1) return 0;
  uint64_t total = 0;
  for (size_t c : counts) total += c;
  return 4 * (total - counts[(rank + 1) % size]);
}

uint64_t TreeBroadcastBytes(uint64_t elements, int rank, int root, int size) {
  // Relative rank v receives from v - 2^j (the highest bit of v) and sends to
  // v + 2^i for every 2^i above v's highest bit while v + 2^i < size.
  const int v = (rank - root + size) % size;
  uint64_t children = 0;
  for (int bit = 1; bit < size; bit <<= 1) {
    if (bit > v && v + bit < size) ++children;
  }
  return children * elements * 4;
}

uint64_t RingAllGatherReceivedBytes(const std::vector<size_t>& counts, int rank) {
  if (counts.size() <= 1) return 0;
  uint64_t total = 0;
  for (size_t c : counts) total += c;
  return 4 * (total - counts[rank]);
}

uint64_t BroadcastReceivedBytes(uint64_t elements, int rank, int root, int size) {
  return size > 1 && rank != root ? 4 * elements : 0;
}

}  // namespace sketchfuse
