#include "worker/pipeline/job_plan.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/compressor.h"
#include "common/compressor_registry.h"
#include "common/cost_model.h"
#include "common/error_text.h"
#include "common/fusion_planner.h"
#include "common/partitioning.h"
#include "proto/job_config_file.h"
#include "proto/run_config.h"
#include "worker/schemes/scheme_registry.h"

namespace sketchfuse {
namespace {

// A cost model for planning on a loopback cluster of small machines: about
// 2 GB/s of compression, 1 GB/s of transfer of the compressed payload and a
// 300 us round latency. Only the ratios matter to the planner's choice.
GroupCostModel LoopbackCostModel() {
  GroupCostModel model;
  model.compress = {20e-6, 0.5e-9};
  model.transfer = {300e-6, 0.1e-9};
  model.decode = {50e-6, 0.5e-9};
  return model;
}

// The blocks of a group that is `part` of `fused` (JobContext::blocks): each
// whole layer of a shape (run.layer_rows) as {rows, cols}, a vector or a
// piece that the partition cut as {1, elements}. Empty without shapes.
std::vector<std::pair<uint64_t, uint64_t>> GroupBlocks(const v1::RunConfig& run, const FusionGroup& fused,
                                                       const Partition& part) {
  std::vector<std::pair<uint64_t, uint64_t>> blocks;
  if (run.layer_rows().empty()) return blocks;
  const int64_t begin = part.offset, end = part.offset + part.num_elements;
  int64_t at = 0;  // the layer's start in the fused group
  for (int l = fused.first_layer; l < fused.first_layer + fused.num_layers; ++l) {
    const int64_t size = static_cast<int64_t>(run.layer_sizes(l));
    const int64_t lo = std::max(at, begin), hi = std::min(at + size, end);
    if (lo < hi) {
      const uint64_t rows = run.layer_rows(l);
      if (lo == at && hi == at + size && rows > 1 && static_cast<int64_t>(rows) < size) {
        blocks.emplace_back(rows, static_cast<uint64_t>(size) / rows);
      } else {
        blocks.emplace_back(1, static_cast<uint64_t>(hi - lo));
      }
    }
    at += size;
  }
  return blocks;
}

// OK if the run's shapes fit its layers, and are there for a method that
// needs them; INVALID_ARGUMENT naming the misfit.
absl::Status CheckLayerShapes(const v1::RunConfig& run, const Compressor& compressor) {
  if (run.layer_rows().empty()) {
    if (!compressor.sums_factor_rounds()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "scheme ", run.scheme(), " compresses each layer as a matrix and needs the layers' shapes; workload ",
        QuoteField(run.workload()), " gives none (the worker's LibTorch workloads do; the synthetic profiles and the "
        "PyTorch hook do not)"));
  }
  if (run.layer_rows_size() != run.layer_sizes_size()) {
    return absl::InvalidArgumentError(absl::StrCat("the run has ", run.layer_rows_size(), " layer shapes for ",
                                                   run.layer_sizes_size(), " layers"));
  }
  for (int l = 0; l < run.layer_rows_size(); ++l) {
    const uint64_t rows = run.layer_rows(l), size = run.layer_sizes(l);
    if (rows == 0 || size % rows != 0) {
      return absl::InvalidArgumentError(absl::StrCat("layer ", l, " of ", size, " elements cannot have ", rows,
                                                     " rows"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::JobConfig> MakeJobConfig(const std::string& job_name, uint32_t world_size,
                                            const v1::RunConfig& run, uint32_t round_deadline_ms,
                                            uint32_t num_shards) {
  if (job_name.empty()) return absl::InvalidArgumentError("the job name is empty");
  if (world_size == 0) return absl::InvalidArgumentError("the world size is 0");
  if (num_shards == 0) return absl::InvalidArgumentError("the shard count is 0");
  if (run.layer_sizes().empty()) return absl::InvalidArgumentError("the run has no layers");
  if (absl::Status s = CheckSchemeCompressor(run.scheme(), run.compressor()); !s.ok()) return s;
  std::vector<LayerTiming> layers;
  // Backward time grows with the layer: the synthetic profiles' modelled time
  // per element, else 1 ns per element (a CPU's order).
  const double ns_per_element = run.backward_ns_per_element() > 0 ? run.backward_ns_per_element() : 1.0;
  for (uint64_t size : run.layer_sizes()) {
    layers.push_back({static_cast<int64_t>(size), 1e-9 * ns_per_element * static_cast<double>(size)});
  }
  absl::StatusOr<FusionPlan> plan = PlanByMode(run.fusion(), layers, LoopbackCostModel());
  if (!plan.ok()) return plan.status();

  // The compressor fills in what it leaves to the job (the seed, a peel
  // table's world size, FetchSGD's momentum, which the servers read from
  // here); every group runs the resulting spec.
  absl::StatusOr<std::unique_ptr<Compressor>> compressor = CompressorRegistry::Default().Create(run.compressor());
  if (!compressor.ok()) return compressor.status();
  if (absl::Status s = CheckLayerShapes(run, **compressor); !s.ok()) return s;

  v1::JobConfig job;
  job.set_job(job_name);
  job.set_world_size(world_size);
  job.set_round_deadline_ms(round_deadline_ms);
  job.set_hash_seed(run.seed());
  *job.mutable_run() = run;

  // Partitions: the run's bound, or the default for the shards (the
  // decentralized schemes' collectives gain nothing from a cut, and a
  // compressor may refuse the default cut: Compressor::cut_for_shards_by_default).
  std::vector<int64_t> fused_sizes;
  for (const FusionGroup& fused : plan->groups) fused_sizes.push_back(fused.num_elements);
  if (!run.has_partition_elements()) {
    const bool cut = SchemeRoute(run.scheme()) != Route::kDecentralized && (*compressor)->cut_for_shards_by_default();
    job.mutable_run()->set_partition_elements(
        cut ? static_cast<uint64_t>(DefaultPartitionElements(fused_sizes, static_cast<int>(num_shards))) : 0);
  }
  const uint64_t bound = job.run().partition_elements();
  if (bound > static_cast<uint64_t>(INT64_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat("partition_elements ", bound, " is past 2^63 - 1"));
  }
  if (bound > 0) {
    uint64_t count = 0;
    for (int64_t n : fused_sizes) count += (static_cast<uint64_t>(n) + bound - 1) / bound;
    if (count > kMaxPartitions) {
      return absl::InvalidArgumentError(absl::StrCat("partition_elements ", bound, " cuts the model into ", count,
                                                     " partitions; at most ", kMaxPartitions, " (each is a round of "
                                                     "its own every step)"));
    }
  }
  absl::StatusOr<std::vector<Partition>> partitions = CutGroups(fused_sizes, static_cast<int64_t>(bound));
  if (!partitions.ok()) return partitions.status();
  for (size_t g = 0; g < partitions->size(); ++g) {
    const Partition& part = (*partitions)[g];
    const FusionGroup& fused = plan->groups[part.fused_group];
    v1::GroupConfig* group = job.add_groups();
    group->set_group(static_cast<uint32_t>(g));
    group->set_dim(static_cast<uint64_t>(part.num_elements));
    group->set_layer_begin(fused.first_layer);
    group->set_layer_end(fused.first_layer + fused.num_layers);
    group->set_offset(static_cast<uint64_t>(part.offset));
    // A low-rank method's spec names the group's matrices.
    const std::string group_compressor =
        (*compressor)->SpecForJob({world_size, run.seed(), run.momentum(), GroupBlocks(run, fused, part)});
    group->set_compressor(group_compressor);
    absl::StatusOr<std::unique_ptr<Compressor>> check =
        CompressorRegistry::Default().Create(group_compressor);
    if (!check.ok()) return check.status();
    // The final round keeps the k largest of its sum (the union of the
    // workers' top k, the fixed sketch's exact sums), k as each worker's.
    absl::StatusOr<uint64_t> reselect = FinalRoundTopK(run.scheme(), group_compressor, group->dim());
    if (!reselect.ok()) return reselect.status();
    if (*reselect > 0) group->set_reselect_top_k(*reselect);
  }
  return job;
}

std::vector<std::string> GroupFitWarnings(const v1::JobConfig& job) {
  std::vector<std::string> warnings;
  for (const v1::GroupConfig& group : job.groups()) {
    absl::StatusOr<std::unique_ptr<Compressor>> compressor = CompressorRegistry::Default().Create(group.compressor());
    if (!compressor.ok()) continue;  // refused where the job is checked
    const std::string warning = (*compressor)->FitWarning(group.dim(), job.world_size());
    if (!warning.empty()) warnings.push_back(absl::StrCat("group ", group.group(), " (", group.dim(), " elements): ", warning));
  }
  return warnings;
}

std::vector<std::string> JobFitWarnings(const v1::JobConfig& job) {
  std::vector<std::string> warnings = GroupFitWarnings(job);
  for (std::string& warning : RunFitWarnings(job)) warnings.push_back(std::move(warning));
  return warnings;
}

std::vector<std::string> RunFitWarnings(const v1::JobConfig& job) {
  std::vector<std::string> warnings;
  for (std::string warning : {SchemeFitWarning(job.run().scheme(), job.world_size()), OptimizerFitWarning(job.run())}) {
    if (!warning.empty()) warnings.push_back(std::move(warning));
  }
  return warnings;
}

absl::Status WriteJobConfigFile(const std::string& job_name, uint32_t world_size, const v1::RunConfig& run,
                                uint32_t round_deadline_ms, uint32_t num_shards, const std::string& path) {
  absl::StatusOr<v1::JobConfig> job = MakeJobConfig(job_name, world_size, run, round_deadline_ms, num_shards);
  if (!job.ok()) return job.status();
  job->set_finished_rounds_kept(16);
  if (absl::Status s = WriteJobConfig(*job, path); !s.ok()) return s;
  std::cout << "sketchfuse_worker: wrote job '" << job->job() << "' (" << DescribeGroups(*job) << " over "
            << run.layer_sizes_size() << " layers, run " << RunFingerprint(job->run()) << ") to " << path << std::endl;
  for (const std::string& warning : JobFitWarnings(*job)) {
    std::cerr << "sketchfuse_worker: warning: " << warning << std::endl;
  }
  return absl::OkStatus();
}

std::vector<GroupLayout> GroupLayouts(const v1::JobConfig& job) {
  std::vector<int64_t> layer_begin(job.run().layer_sizes_size() + 1, 0);
  for (int l = 0; l < job.run().layer_sizes_size(); ++l) {
    layer_begin[l + 1] = layer_begin[l] + static_cast<int64_t>(job.run().layer_sizes(l));
  }
  std::vector<GroupLayout> layouts;
  for (const v1::GroupConfig& g : job.groups()) {
    const int64_t fused_begin = g.layer_begin() < layer_begin.size() ? layer_begin[g.layer_begin()] : 0;
    layouts.push_back({fused_begin + static_cast<int64_t>(g.offset()), static_cast<int64_t>(g.dim())});
  }
  return layouts;
}


}  // namespace sketchfuse
