// Partitions: how a job spreads its fused groups over aggregation shards.
//
// A shard serves whole groups, so a model fused into fewer groups than there
// are shards (the main job's MLP is one group) leaves shards idle, and
// unequal groups load them unequally. The job plan therefore cuts each fused
// group into partitions of at most `partition_elements` elements (BytePS cuts
// every tensor into fixed-size pieces the same way) and the shards are given
// partitions, not groups, by longest-processing-time greedy
// (AssignGroupsToShards in common/fusion_planner.h). A partition is
// compressed, pushed, merged, decoded and journaled as a group of its own:
// a shard's bytes and its decode work both grow with its partitions'
// elements (a sketch's shape and k follow the partition's size), so the
// element count is the cost LPT balances.
//
// Every process derives the same partitions from the job config, so workers
// and shards agree without negotiation.
#ifndef SKETCHFUSE_COMMON_PARTITIONING_H_
#define SKETCHFUSE_COMMON_PARTITIONING_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace sketchfuse {

// Partitions smaller than this are not made by default: below it a
// partition's fixed costs (a round, a push, a sketch's rows) outweigh the
// balance it buys.
inline constexpr int64_t kMinDefaultPartitionElements = 4096;

// One partition: elements [offset, offset + num_elements) of fused group
// `fused_group`.
struct Partition {
  int fused_group = 0;
  int64_t offset = 0;
  int64_t num_elements = 0;
};

// The default bound for `num_shards` shards and fused groups of
// `group_elements` elements: 0 (no cut) for one shard; otherwise the largest
// bound ceil(total / (m * num_shards)), m = 2, 4, 8, under which
// AssignGroupsToShards keeps every shard within kDefaultBalance of the mean
// load; m = 8 if none does. Never below kMinDefaultPartitionElements. A
// one-group model gets two equal partitions per shard: a shard's second
// partition is pushed while its first is answered, which one partition per
// shard does not overlap (docs/BENCHMARKS.md, "The aggregation servers"),
// and each further partition costs a round every step.
inline constexpr double kDefaultBalance = 1.1;
int64_t DefaultPartitionElements(absl::Span<const int64_t> group_elements, int num_shards);

// A partition bound as text (a flag, a setting): digits only, 0 meaning no
// cut. False for anything else (a sign, a fraction, a number past 2^64 - 1).
bool ParsePartitionElements(absl::string_view text, uint64_t* bound);

// Cuts each fused group of n elements into ceil(n / bound) consecutive
// partitions whose sizes differ by at most one (the larger first); bound 0
// leaves every group whole. Partitions come in group order, then offset
// order. INVALID_ARGUMENT for a negative bound or a group of fewer than one
// element.
absl::StatusOr<std::vector<Partition>> CutGroups(absl::Span<const int64_t> group_elements, int64_t bound);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_PARTITIONING_H_
