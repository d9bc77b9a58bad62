// A job's configuration as the servers use it: its groups' layers checked,
// and the groups one shard of S serves. (The file is read by
// proto/job_config_file.h.) Groups (partitions, where the job cuts its fused
// groups) are spread over shards by size with the fusion planner's
// AssignGroupsToShards, so every process derives the same map.
#ifndef SKETCHFUSE_SERVER_JOB_CONFIG_H_
#define SKETCHFUSE_SERVER_JOB_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/job_config.pb.h"
#include "proto/job_config_file.h"
#include "server/aggregation_core.h"

namespace sketchfuse {

// OK when the job has no run section, or when its fused groups' layer ranges
// tile [0, run.layer_sizes) in order, each non-empty, and each fused group is
// either one group whose dim is the sum of its layers' sizes or consecutive
// partitions (GroupConfig.offset) that tile those elements, exactly as
// run.partition_elements cuts them (common/partitioning.h: CutGroups).
// INVALID_ARGUMENT naming the first bad group or partition.
absl::Status ValidateGroupLayers(const v1::JobConfig& config);

// Shard index of each group (in the order of config.groups()).
absl::StatusOr<std::vector<int>> ShardOfGroups(const v1::JobConfig& config, int num_shards);

// The AggregationConfig of shard `shard_index` of `num_shards`: the groups it
// serves. INVALID_ARGUMENT for a shard index out of range, or a config that
// AggregationCore would refuse (checked by creating it).
absl::StatusOr<AggregationConfig> ShardConfig(const v1::JobConfig& config, int shard_index,
                                              int num_shards);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_SERVER_JOB_CONFIG_H_
