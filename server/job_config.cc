#include "server/job_config.h"

#include <cstdint>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/fusion_planner.h"
#include "common/partitioning.h"
#include "proto/run_config.h"

namespace sketchfuse {

absl::Status ValidateGroupLayers(const v1::JobConfig& config) {
  if (!config.has_run()) return absl::OkStatus();
  const auto& sizes = config.run().layer_sizes();
  uint32_t next = 0;
  std::vector<int64_t> fused_sizes;
  uint64_t fused_dim = 0, covered = 0;  // the current fused group's elements, and its partitions' so far
  for (int i = 0; i < config.groups_size(); ++i) {
    const v1::GroupConfig& g = config.groups(i);
    if (g.offset() > 0) {
      // A further partition of the fused group before it.
      const v1::GroupConfig* before = i > 0 ? &config.groups(i - 1) : nullptr;
      if (before == nullptr || g.layer_begin() != before->layer_begin() || g.layer_end() != before->layer_end() ||
          g.offset() != covered || g.dim() == 0 || g.dim() > fused_dim - covered) {
        return absl::InvalidArgumentError(absl::StrCat(
            "job config: group ", g.group(), " is a partition at offset ", g.offset(), " of ", g.dim(),
            " elements of layers [", g.layer_begin(), ", ", g.layer_end(),
            "); expected the next partition of the group before it, at offset ", covered, " within its ", fused_dim,
            " elements"));
      }
      covered += g.dim();
      continue;
    }
    if (i > 0 && covered != fused_dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job config: the partitions of layers [", config.groups(i - 1).layer_begin(), ", ",
          config.groups(i - 1).layer_end(), ") cover ", covered, " of their ", fused_dim, " elements"));
    }
    if (g.layer_begin() != next || g.layer_end() <= g.layer_begin() ||
        g.layer_end() > static_cast<uint32_t>(sizes.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job config: group ", g.group(), " covers layers [", g.layer_begin(), ", ", g.layer_end(),
          "); expected a non-empty range starting at layer ", next, " within the run's ",
          sizes.size(), " layers"));
    }
    uint64_t dim = 0;
    for (uint32_t l = g.layer_begin(); l < g.layer_end(); ++l) dim += sizes[l];
    fused_dim = dim;
    covered = g.dim();
    fused_sizes.push_back(static_cast<int64_t>(dim));
    const bool next_is_partition = i + 1 < config.groups_size() && config.groups(i + 1).offset() > 0;
    if (g.dim() == 0 || g.dim() > dim || (g.dim() != dim && !next_is_partition)) {
      return absl::InvalidArgumentError(absl::StrCat("job config: group ", g.group(), " has dim ",
                                                     g.dim(), " but its layers hold ", dim, " elements"));
    }
    next = g.layer_end();
  }
  if (covered != fused_dim) {
    return absl::InvalidArgumentError(absl::StrCat("job config: the partitions of the last fused group cover ",
                                                   covered, " of its ", fused_dim, " elements"));
  }
  if (next != static_cast<uint32_t>(sizes.size())) {
    return absl::InvalidArgumentError(absl::StrCat("job config: the groups cover layers [0, ", next,
                                                   ") of the run's ", sizes.size(), " layers"));
  }
  // The partitions must be the ones the run's bound makes, so every process
  // that derives them from the run agrees.
  const uint64_t bound = config.run().partition_elements();
  if (bound > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("job config: partition_elements ", bound, " is past 2^63 - 1"));
  }
  absl::StatusOr<std::vector<Partition>> expected = CutGroups(fused_sizes, static_cast<int64_t>(bound));
  if (!expected.ok()) return expected.status();
  for (int i = 0; i < config.groups_size(); ++i) {
    const v1::GroupConfig& g = config.groups(i);
    if (i >= static_cast<int>(expected->size()) || (*expected)[i].offset != static_cast<int64_t>(g.offset()) ||
        (*expected)[i].num_elements != static_cast<int64_t>(g.dim())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job config: group ", g.group(), " (offset ", g.offset(), ", ", g.dim(),
          " elements) is not a partition that partition_elements ", bound, " makes (",
          expected->size(), " partitions of ", fused_sizes.size(),
          fused_sizes.size() == 1 ? " fused group)" : " fused groups)"));
    }
  }
  if (expected->size() != static_cast<size_t>(config.groups_size())) {
    return absl::InvalidArgumentError(absl::StrCat("job config: partition_elements ", bound, " makes ",
                                                   expected->size(), " partitions; the job has ",
                                                   config.groups_size(), " groups"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> ShardOfGroups(const v1::JobConfig& config, int num_shards) {
  FusionPlan plan;
  for (const v1::GroupConfig& g : config.groups()) {
    if (g.dim() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(absl::StrCat("group ", g.group(), " has dim ", g.dim(), ", past 2^63 - 1"));
    }
    plan.groups.push_back({0, 1, static_cast<int64_t>(g.dim())});
  }
  return AssignGroupsToShards(plan, num_shards);
}

absl::StatusOr<AggregationConfig> ShardConfig(const v1::JobConfig& config, int shard_index,
                                              int num_shards) {
  if (num_shards < 1 || shard_index < 0 || shard_index >= num_shards) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard index ", shard_index, " is out of range for ", num_shards, " shards"));
  }
  if (absl::Status layers = ValidateGroupLayers(config); !layers.ok()) return layers;
  absl::StatusOr<std::vector<int>> shards = ShardOfGroups(config, num_shards);
  if (!shards.ok()) return shards.status();
  AggregationConfig out;
  out.job = config.job();
  out.world_size = config.world_size();
  if (config.round_deadline_ms() > 0) {
    out.round_deadline = absl::Milliseconds(config.round_deadline_ms());
  }
  if (config.finished_rounds_kept() > 0) out.finished_rounds_kept = config.finished_rounds_kept();
  for (int i = 0; i < config.groups_size(); ++i) {
    if ((*shards)[i] != shard_index) continue;
    const v1::GroupConfig& g = config.groups(i);
    out.groups.push_back({g.group(), g.dim(), g.compressor(), g.reselect_top_k(), RoundsPerStep(config.run())});
  }
  absl::StatusOr<std::unique_ptr<AggregationCore>> check = AggregationCore::Create(out);
  if (!check.ok()) return check.status();
  return out;
}

}  // namespace sketchfuse
