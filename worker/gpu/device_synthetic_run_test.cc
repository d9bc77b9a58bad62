// A synthetic ResNet-50 run with its groups on the GPU, against the same run
// on the host: two workers (threads of one process, a real Gloo group on
// loopback) take three steps, each from device memory and from host memory:
// sketch_allreduce with the scheme's default sketch (method=peel, under the
// release cap) and with method=estimate, and fixed_sketch_allreduce with its
// default (method=candidates and the second round, whose exact values the
// GPU gathers from its residual). The sketches differ only in float
// rounding, so the two runs agree: every step sends the same bytes, each
// worker's final residual and velocity match within 1e-3 of their norms, and
// the peel's recovered share (counted on both placements) within 1e-3 (a
// coordinate at the top-k boundary, or at the edge of what the peel
// separates, may be taken in one run and not in the other; the rest are
// identical).
#include <cmath>
#include <tuple>

#include "absl/strings/match.h"
#include "cuda/gpu_test_util.h"
#include "gtest/gtest.h"
#include "worker/collective/local_group.h"
#include "worker/schemes/collective_scheme.h"
#include "worker/schemes/scheme_registry.h"
#include "worker/pipeline/job_plan.h"
#include "worker/training/synthetic_runner.h"

namespace sketchfuse {
namespace {

struct Method {
  std::string scheme;
  std::string compressor;
};

v1::RunConfig ResNetRun(const std::string& device, const Method& method) {
  v1::RunConfig run;
  run.set_workload("resnet50");
  run.set_scheme(method.scheme);
  run.set_second_round(SecondRoundFor(method.scheme, false));
  run.set_compressor(method.compressor);
  run.set_release_cap(1.0);
  run.set_fusion("4");
  run.set_error_feedback(true);
  run.set_momentum(0.9);
  run.set_epochs(1);
  run.set_synthetic_steps(3);
  run.set_backward_ns_per_element(0);
  run.set_device(device);
  EXPECT_TRUE(DescribeSyntheticRun(&run).ok());
  return run;
}

struct RankResult {
  TrainingSummary summary;
  std::vector<GroupState> state;
};

std::vector<RankResult> RunTwoWorkers(const std::string& device, const Method& method) {
  const v1::RunConfig run = ResNetRun(device, method);
  absl::StatusOr<v1::JobConfig> job = MakeJobConfig("synthetic", 2, run);
  EXPECT_TRUE(job.ok()) << job.status();
  std::vector<RankResult> results(2);
  const std::vector<absl::Status> statuses = RunOnLocalGlooGroup(2, [&](Collective& collective) -> absl::Status {
    absl::StatusOr<std::unique_ptr<CollectiveScheme>> scheme = CollectiveScheme::Create(*job, &collective);
    if (!scheme.ok()) return scheme.status();
    SyntheticConfig config;
    *config.joined.mutable_job() = *job;
    config.joined.set_rank(collective.rank());
    config.joined.set_world_size(2);
    absl::StatusOr<std::unique_ptr<SyntheticRunner>> runner = SyntheticRunner::Create(config, scheme->get());
    if (!runner.ok()) return runner.status();
    absl::StatusOr<TrainingSummary> summary = (*runner)->Run(nullptr);
    if (!summary.ok()) return summary.status();
    results[collective.rank()] = RankResult{*summary, (*scheme)->SaveState()};
    return absl::OkStatus();
  });
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << device << ": " << s;
  return results;
}

double Norm(const std::vector<float>& v) {
  double sum = 0;
  for (float x : v) sum += static_cast<double>(x) * x;
  return std::sqrt(sum);
}

class DeviceSyntheticRunTest : public ::testing::TestWithParam<Method> {};

TEST_P(DeviceSyntheticRunTest, TheGpuPlacementTrainsLikeTheHostOne) {
  SKIP_WITHOUT_GPU();
  const std::vector<RankResult> host = RunTwoWorkers("cpu", GetParam());
  const std::vector<RankResult> gpu = RunTwoWorkers("gpu", GetParam());
  ASSERT_EQ(host.size(), 2u);
  ASSERT_EQ(gpu.size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(testing::Message() << "rank " << rank);
    EXPECT_EQ(gpu[rank].summary.steps, 3);
    EXPECT_EQ(gpu[rank].summary.collective_steps, 3);
    EXPECT_GT(gpu[rank].summary.bytes_sent_per_step, 0);
    EXPECT_EQ(gpu[rank].summary.bytes_sent_per_step, host[rank].summary.bytes_sent_per_step);
    // The peel's recovery is counted on both placements (the GPU gathers the
    // residual at its selection), and only for the peel.
    if (absl::StrContains(GetParam().compressor, "method=peel")) {
      EXPECT_GT(host[rank].summary.peel_recovered_share, 0);
      EXPECT_NEAR(gpu[rank].summary.peel_recovered_share, host[rank].summary.peel_recovered_share, 1e-3);
    } else {
      EXPECT_EQ(host[rank].summary.peel_recovered_share, -1);
      EXPECT_EQ(gpu[rank].summary.peel_recovered_share, -1);
    }
    ASSERT_EQ(gpu[rank].state.size(), host[rank].state.size());
    for (size_t g = 0; g < host[rank].state.size(); ++g) {
      for (const auto& [part, want, got] :
           {std::make_tuple("residual", &host[rank].state[g].residual, &gpu[rank].state[g].residual),
            std::make_tuple("velocity", &host[rank].state[g].velocity, &gpu[rank].state[g].velocity)}) {
        ASSERT_EQ(got->size(), want->size()) << "group " << g << " " << part;
        ASSERT_FALSE(want->empty()) << "group " << g << " " << part;  // every group keeps both
        std::vector<float> diff(want->size());
        for (size_t j = 0; j < want->size(); ++j) diff[j] = (*got)[j] - (*want)[j];
        EXPECT_LE(Norm(diff), 1e-3 * Norm(*want)) << "group " << g << " " << part;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Methods, DeviceSyntheticRunTest,
    ::testing::Values(Method{"sketch_allreduce", "count_sketch:method=peel,density=0.0042,rows=4,width=4"},
                      Method{"sketch_allreduce", "count_sketch:method=estimate,density=0.001,rows=5,width=10"},
                      Method{"fixed_sketch_allreduce", "count_sketch:method=candidates,density=0.0333,rows=1,"
                                                       "width=1,candidates=2,table=bf16"}),
    [](const ::testing::TestParamInfo<Method>& info) {
      return info.param.scheme + "_" + std::to_string(info.index);
    });

}  // namespace
}  // namespace sketchfuse
