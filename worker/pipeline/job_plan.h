// The job configuration a launcher writes for a run: the fusion plan over the
// run's layers (common/fusion_planner.h), each group's compressor with the
// job's hash seed, and the server-side settings the scheme needs. Servers and
// the coordinator read it; workers check their own run against it on join.
#ifndef SKETCHFUSE_WORKER_PIPELINE_JOB_PLAN_H_
#define SKETCHFUSE_WORKER_PIPELINE_JOB_PLAN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/job_config.pb.h"
#include "worker/pipeline/step_pipeline.h"

namespace sketchfuse {

// The most partitions a job is cut into.
inline constexpr uint64_t kMaxPartitions = 4096;

// The job for `run` (whose layer_sizes, scheme, compressor and fusion mode
// must be set) with `world_size` workers and `num_shards` aggregation
// shards. The fusion plan's groups are cut into partitions
// (common/partitioning.h) of at most run.partition_elements elements, or,
// where the run leaves it unset, of the default bound for `num_shards`
// (none for one shard, a decentralized scheme, or a compressor that is not
// cut by default: Compressor::cut_for_shards_by_default); the job's run states the
// bound it used, and each partition is one GroupConfig. Count-Sketch groups
// get seed = run.seed; topk_ps groups get the server's re-selection at the
// groups' k. INVALID_ARGUMENT for an unknown fusion mode, scheme or
// compressor, a compressor that does not fit the scheme, no shards, or a
// bound that makes more than kMaxPartitions partitions.
absl::StatusOr<v1::JobConfig> MakeJobConfig(const std::string& job_name, uint32_t world_size,
                                            const v1::RunConfig& run, uint32_t round_deadline_ms = 60000,
                                            uint32_t num_shards = 1);

// One line per group whose compressor will serve the job's world size
// poorly (Compressor::FitWarning: a peeled sketch too small for the
// workers' selections, with its expected recovery, or larger than the
// dense gradient), naming the group; empty when all fit.
std::vector<std::string> GroupFitWarnings(const v1::JobConfig& job);

// GroupFitWarnings, then the run's (RunFitWarnings). Workers print them at
// join and keep them in their summaries.
std::vector<std::string> JobFitWarnings(const v1::JobConfig& job);

// The run's own warnings, whatever its groups: the scheme's
// (SchemeFitWarning: a route that serves this many workers poorly), then
// its optimizer's (OptimizerFitWarning: a scheme the measurements say loses
// with it).
std::vector<std::string> RunFitWarnings(const v1::JobConfig& job);

// MakeJobConfig (keeping 16 finished rounds per group, for resumed workers)
// written to `path` (JSON, proto/job_config_file.h), with a line naming the
// job on standard output and its JobFitWarnings on standard error: what a
// launcher runs once before it starts the servers.
absl::Status WriteJobConfigFile(const std::string& job_name, uint32_t world_size, const v1::RunConfig& run,
                                uint32_t round_deadline_ms, uint32_t num_shards, const std::string& path);

// The pipeline layout of a job's groups (partitions): each one's range of
// the flat gradient, from its fused layers' first element and its offset.
std::vector<GroupLayout> GroupLayouts(const v1::JobConfig& job);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_PIPELINE_JOB_PLAN_H_
