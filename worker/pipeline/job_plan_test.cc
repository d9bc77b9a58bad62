#include "worker/pipeline/job_plan.h"

#include <string>

#include "common/compressor_registry.h"
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

// FetchSGD's momentum lives with the sum: the job carries the run's.
TEST(JobPlanTest, FetchSgdCarriesTheRunsMomentum) {
  absl::StatusOr<v1::JobConfig> job =
      MakeJobConfig("j", 4, MlpRun("sketch_ps", "count_sketch:method=fetchsgd,density=0.01,rows=1,width=5"));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->groups(0).compressor(), "count_sketch:method=fetchsgd,density=0.01,rows=1,width=5,seed=9,momentum=0.9");
}

}  // namespace
}  // namespace sketchfuse
