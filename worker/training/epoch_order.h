// The order in which a worker visits its shard of the training data in an
// epoch: a shuffle seeded by (seed, rank, epoch), so a restarted worker, and
// the PyTorch example through the C ABI (sf_epoch_order), visit the same
// examples in the same order as an uninterrupted sketchfuse_worker.
#ifndef SKETCHFUSE_WORKER_TRAINING_EPOCH_ORDER_H_
#define SKETCHFUSE_WORKER_TRAINING_EPOCH_ORDER_H_

#include <cstdint>
#include <vector>

namespace sketchfuse {

// A permutation of [0, n) (empty for n <= 0).
std::vector<int64_t> EpochOrder(uint64_t seed, int rank, int64_t epoch, int64_t n);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_TRAINING_EPOCH_ORDER_H_
