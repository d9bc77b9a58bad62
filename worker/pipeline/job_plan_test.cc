#include "worker/pipeline/job_plan.h"

#include <string>

#include "common/compressor_registry.h"
#include "proto/run_config.h"
#include "worker/schemes/scheme_registry.h"
#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

v1::RunConfig MlpRun(const std::string& scheme, const std::string& compressor) {
  v1::RunConfig run;
  run.set_scheme(scheme);
  run.set_compressor(compressor);
  run.set_fusion("single");
  run.set_seed(9);
  run.set_momentum(0.9);
  for (uint64_t size : {10, 1280, 128, 32768, 256, 200704}) run.add_layer_sizes(size);  // the MLP, backward order
  return run;
}

// A peel sketch without an explicit shape is sized for the job's world
// size: every group's spec carries it, with the job's seed.
TEST(JobPlanTest, PeelSketchesAreSizedForTheJobsWorkers) {
  for (uint32_t world : {2u, 4u, 8u, 16u}) {
    absl::StatusOr<v1::JobConfig> job =
        MakeJobConfig("j", world, MlpRun("sketch_ps", "count_sketch:method=peel,density=0.00625,rows=4"));
    ASSERT_TRUE(job.ok()) << job.status();
    ASSERT_EQ(job->groups_size(), 1);
    EXPECT_EQ(job->groups(0).compressor(),
              "count_sketch:method=peel,density=0.00625,rows=4,workers=" + std::to_string(world) + ",seed=9");
    const auto layout = (*CompressorRegistry::Default().Create(job->groups(0).compressor()))->SketchLayoutFor(235146);
    EXPECT_EQ(layout->shape.cols, world * 1470u);
    EXPECT_TRUE(JobFitWarnings(*job).empty()) << JobFitWarnings(*job)[0];
  }
}

// An explicit shape is kept, and when it is too small for the world size
// the job's warnings name the group, the spec and the expected recovery.
TEST(JobPlanTest, AnExplicitShapeTooSmallIsWarnedAboutByName) {
  absl::StatusOr<v1::JobConfig> job =
      MakeJobConfig("j", 16, MlpRun("sketch_allreduce", "count_sketch:method=peel,density=0.00625,rows=4,width=4"));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->groups(0).compressor(), "count_sketch:method=peel,density=0.00625,rows=4,width=4,seed=9");
  const std::vector<std::string> warnings = JobFitWarnings(*job);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("group 0 (235146 elements)"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("width=4"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("expected to recover"), std::string::npos) << warnings[0];
  // The same shape at the world size it was made for fits.
  absl::StatusOr<v1::JobConfig> four =
      MakeJobConfig("j", 4, MlpRun("sketch_allreduce", "count_sketch:method=peel,density=0.00625,rows=4,width=4"));
  EXPECT_TRUE(JobFitWarnings(*four).empty());
}

// The fixed sketch on the ring from 16 workers is warned about by name, with
// its route's factor and the centralized route to use; below 16 workers, and
// on the centralized route or the hybrid at any W, it is not.
TEST(JobPlanTest, TheFixedSketchsRingIsWarnedAboutFromSixteenWorkers) {
  const std::string spec = FindScheme("fixed_sketch_allreduce")->default_compressor_spec;
  for (uint32_t world : {16u, 64u}) {
    absl::StatusOr<v1::JobConfig> job = MakeJobConfig("j", world, MlpRun("fixed_sketch_allreduce", spec));
    ASSERT_TRUE(job.ok()) << job.status();
    const std::vector<std::string> warnings = JobFitWarnings(*job);
    ASSERT_EQ(warnings.size(), 1u) << world;
    EXPECT_EQ(warnings[0].find("fixed_sketch_allreduce at " + std::to_string(world) + " workers"), 0u) << warnings[0];
    EXPECT_NE(warnings[0].find(world == 16 ? "1.88 times" : "1.97 times"), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find("fixed_sketch_ps keeps the same bytes"), std::string::npos) << warnings[0];
  }
  absl::StatusOr<v1::JobConfig> eight = MakeJobConfig("j", 8, MlpRun("fixed_sketch_allreduce", spec));
  ASSERT_TRUE(eight.ok()) << eight.status();
  EXPECT_TRUE(JobFitWarnings(*eight).empty()) << JobFitWarnings(*eight)[0];
  for (const std::string scheme : {"fixed_sketch_ps", "fixed_sketch_auto"}) {
    absl::StatusOr<v1::JobConfig> job = MakeJobConfig("j", 256, MlpRun(scheme, spec));
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_TRUE(JobFitWarnings(*job).empty()) << scheme << ": " << JobFitWarnings(*job)[0];
  }
  EXPECT_EQ(SchemeFitWarning("no_such_scheme", 64), "");
  EXPECT_EQ(SchemeFitWarning("sketch_allreduce", 64), "");
}

// A fixed-size sketch with an Adam-family optimizer is warned about by name
// (the scheme and the optimizer, the schemes to use), on every route and with
// its compressor given explicitly; with SGD, or Adam with another sketch or a
// selection, it is not.
TEST(JobPlanTest, AFixedSketchWithAdamIsWarnedAboutByName) {
  const std::string fixed = FindScheme("fixed_sketch_ps")->default_compressor_spec;
  auto adam_run = [](const std::string& scheme, const std::string& compressor, const std::string& optimizer) {
    v1::RunConfig run = MlpRun(scheme, compressor);
    run.set_momentum(0);
    run.set_optimizer(optimizer);
    return run;
  };
  for (const std::string scheme : {"fixed_sketch_ps", "fixed_sketch_allreduce", "fixed_sketch_auto"}) {
    for (const std::string optimizer : {"adamw:beta2=0.95", "adam"}) {
      absl::StatusOr<v1::JobConfig> job = MakeJobConfig("j", 4, adam_run(scheme, fixed, optimizer));
      ASSERT_TRUE(job.ok()) << job.status();
      const std::vector<std::string> warnings = JobFitWarnings(*job);
      ASSERT_EQ(warnings.size(), 1u) << scheme << " " << optimizer;
      EXPECT_EQ(warnings[0].find(scheme + " with " + optimizer.substr(0, optimizer.find(':')) + ":"), 0u)
          << warnings[0];
      EXPECT_NE(warnings[0].find("use topk_allgather, or topk_ps or gtopk"), std::string::npos) << warnings[0];
      EXPECT_EQ(RunFitWarnings(*job), warnings);
    }
  }
  // The scheme's default compressor, unstated, is the fixed sketch too.
  EXPECT_EQ(OptimizerFitWarning(adam_run("fixed_sketch_ps", "", "adamw")).find("fixed_sketch_ps with adamw:"), 0u);
  // SGD with the fixed sketch, and Adam with the peel sketch or Top-k: no warning.
  EXPECT_EQ(OptimizerFitWarning(MlpRun("fixed_sketch_ps", fixed)), "");
  EXPECT_EQ(OptimizerFitWarning(adam_run("sketch_allreduce", "count_sketch:method=peel,density=0.0042,rows=4", "adamw")),
            "");
  EXPECT_EQ(OptimizerFitWarning(adam_run("topk_allgather", "topk:density=0.01", "adamw")), "");
  EXPECT_EQ(OptimizerFitWarning(adam_run("no_such_scheme", fixed, "adamw")), "");
}

// FetchSGD's momentum lives with the sum: the job carries the run's.
TEST(JobPlanTest, FetchSgdCarriesTheRunsMomentum) {
  absl::StatusOr<v1::JobConfig> job =
      MakeJobConfig("j", 4, MlpRun("sketch_ps", "count_sketch:method=fetchsgd,density=0.01,rows=1,width=5"));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->groups(0).compressor(), "count_sketch:method=fetchsgd,density=0.01,rows=1,width=5,seed=9,momentum=0.9");
}


// The job is cut into partitions for its shards: none for one shard, two
// equal ones per shard for a one-group model (the MLP's 235,146 elements on
// two shards: four partitions, two on each), every one within the fused
// group's layers at its offset, and the pipeline's layout follows them.
TEST(JobPlanTest, PartitionsFollowTheShards) {
  const v1::RunConfig run = MlpRun("sketch_ps", "count_sketch:method=peel,density=0.00625,rows=4");
  absl::StatusOr<v1::JobConfig> one = MakeJobConfig("j", 4, run, 60000, 1);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->groups_size(), 1);
  EXPECT_EQ(one->run().partition_elements(), 0u);
  EXPECT_TRUE(one->run().has_partition_elements());

  absl::StatusOr<v1::JobConfig> two = MakeJobConfig("j", 4, run, 60000, 2);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->run().partition_elements(), 58787u);  // ceil(235146 / 4)
  ASSERT_EQ(two->groups_size(), 4);
  uint64_t offset = 0;
  for (int g = 0; g < 4; ++g) {
    const v1::GroupConfig& part = two->groups(g);
    EXPECT_EQ(part.group(), static_cast<uint32_t>(g));
    EXPECT_EQ(part.layer_begin(), 0u);
    EXPECT_EQ(part.layer_end(), 6u);
    EXPECT_EQ(part.offset(), offset);
    EXPECT_EQ(part.dim(), g < 2 ? 58787u : 58786u);
    offset += part.dim();
  }
  EXPECT_EQ(offset, 235146u);
  const std::vector<GroupLayout> layouts = GroupLayouts(*two);
  ASSERT_EQ(layouts.size(), 4u);
  EXPECT_EQ(layouts[2].begin, 2 * 58787);
  EXPECT_EQ(layouts[2].size, 58786);
  EXPECT_EQ(DescribeGroups(*two), "4 partitions of 1 fused group (partition_elements 58787)");
  // Each partition's sketch is shaped for the partition.
  const auto layout = (*CompressorRegistry::Default().Create(two->groups(0).compressor()))->SketchLayoutFor(58787);
  EXPECT_TRUE(layout.has_value());
}

// A bound the run states is kept whatever the shards (0: no cut), and a
// decentralized scheme is not cut by default: its collectives gain nothing.
TEST(JobPlanTest, AnExplicitBoundIsKeptAndCollectivesAreNotCut) {
  v1::RunConfig run = MlpRun("sketch_ps", "count_sketch:method=peel,density=0.00625,rows=4");
  run.set_partition_elements(100000);
  absl::StatusOr<v1::JobConfig> job = MakeJobConfig("j", 4, run, 60000, 1);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->groups_size(), 3);  // ceil(235146 / 100000)
  run.set_partition_elements(0);
  job = MakeJobConfig("j", 4, run, 60000, 4);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->groups_size(), 1);
  job = MakeJobConfig("j", 4, MlpRun("sketch_allreduce", "count_sketch:method=peel,density=0.00625,rows=4"), 60000, 4);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->groups_size(), 1);
  EXPECT_EQ(job->run().partition_elements(), 0u);
  EXPECT_EQ(MakeJobConfig("j", 4, run, 60000, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

// The fixed-size candidates sketch is not cut by default (its table follows
// a partition's elements, not its mass); a bound the run states still cuts
// it.
TEST(JobPlanTest, TheCandidatesSketchIsNotCutUnlessTheRunSaysSo) {
  const std::string fixed = "count_sketch:method=candidates,density=0.0333,rows=1,width=1,candidates=2";
  absl::StatusOr<v1::JobConfig> job = MakeJobConfig("j", 16, MlpRun("fixed_sketch_ps", fixed), 60000, 2);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->groups_size(), 1);
  EXPECT_EQ(job->run().partition_elements(), 0u);
  job = MakeJobConfig("j", 16, MlpRun("fixed_sketch_auto", fixed), 60000, 2);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->groups_size(), 1);
  v1::RunConfig run = MlpRun("fixed_sketch_ps", fixed);
  run.set_partition_elements(58787);
  job = MakeJobConfig("j", 16, run, 60000, 2);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->groups_size(), 4);
  // The peel on the same shards is cut.
  job = MakeJobConfig("j", 16, MlpRun("sketch_ps", "count_sketch:method=peel,density=0.00625,rows=4"), 60000, 2);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->groups_size(), 4);
}

// Fused groups of many layers are cut inside layers, and the job stays one
// that the servers accept; the topk_ps re-selection is each partition's k.
TEST(JobPlanTest, PartitionsOfSeveralGroupsAreValidJobs) {
  v1::RunConfig run = MlpRun("topk_ps", "topk:density=0.01");
  run.set_fusion("2");
  absl::StatusOr<v1::JobConfig> job = MakeJobConfig("j", 4, run, 60000, 3);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_GT(job->groups_size(), 2);
  uint64_t total = 0;
  for (const v1::GroupConfig& g : job->groups()) {
    total += g.dim();
    EXPECT_LE(g.dim(), job->run().partition_elements());
    EXPECT_EQ(g.reselect_top_k(), *SpecSelectionSize(g.compressor(), g.dim()));
  }
  EXPECT_EQ(total, 235146u);
}

// PowerSGD's groups name their matrices (the run's layer shapes, backward
// order); a run without shapes, or with shapes that do not fit its layers,
// is refused by name.
TEST(JobPlanTest, LowRankGroupsNameTheirMatricesAndNeedTheShapes) {
  v1::RunConfig run = MlpRun("powersgd_allreduce", "powersgd:rank=4");
  run.set_momentum(0);
  for (uint64_t rows : {1, 10, 1, 128, 1, 256}) run.add_layer_rows(rows);
  absl::StatusOr<v1::JobConfig> job = MakeJobConfig("j", 4, run);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->groups_size(), 1);
  EXPECT_EQ(job->groups(0).compressor(), "powersgd:rank=4,seed=9,shapes=10.10x128.128.128x256.256.256x784");

  v1::RunConfig no_shapes = MlpRun("powersgd_allreduce", "powersgd:rank=4");
  absl::StatusOr<v1::JobConfig> refused = MakeJobConfig("j", 4, no_shapes);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("needs the layers' shapes"), std::string::npos) << refused.status();

  v1::RunConfig misfit = run;
  misfit.set_layer_rows(3, 127);
  refused = MakeJobConfig("j", 4, misfit);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("layer 3 of 32768 elements cannot have 127 rows"), std::string::npos)
      << refused.status();
  v1::RunConfig fewer = run;
  fewer.mutable_layer_rows()->RemoveLast();
  refused = MakeJobConfig("j", 4, fewer);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("5 layer shapes for 6 layers"), std::string::npos) << refused.status();
}

}  // namespace
}  // namespace sketchfuse
