// Synthetic-profile runs: the ResNet-50 profile's 161 layers, fused into
// groups, go through the real pipeline and a real (one-rank Gloo) scheme.
//  - Overlap: in a step, each group but the last starts its exchange before
//    the backward pass of the remaining layers ends (checked from the
//    recorded event order, not from timings; the modelled backward pass,
//    about half a second, is ten times the three exchanges that must fit in
//    it even on a loaded CI machine, where one dense one-rank exchange of a
//    ResNet-50 group was seen to take 60 ms).
//  - The run reports steps, traffic and the compression ratio, no accuracy.
//  - Runs that do not fit the profile are refused.
#include "worker/training/synthetic_runner.h"

#include <map>

#include "absl/strings/str_cat.h"

#include "daemon/memory_tuning.h"
#include "gtest/gtest.h"
#include "worker/collective/local_group.h"
#include "worker/schemes/collective_scheme.h"
#include "worker/pipeline/job_plan.h"
#include "worker/training/workloads.h"

namespace sketchfuse {
namespace {

v1::JoinReply JoinedResNet(const std::string& scheme, const std::string& compressor, const std::string& fusion,
                           double backward_ns_per_element = 0.5) {
  v1::RunConfig run;
  run.set_workload("resnet50");
  run.set_scheme(scheme);
  run.set_compressor(compressor);
  run.set_fusion(fusion);
  run.set_error_feedback(true);
  run.set_momentum(0.9);
  run.set_epochs(1);
  run.set_synthetic_steps(3);
  run.set_backward_ns_per_element(backward_ns_per_element);
  EXPECT_TRUE(DescribeRun(1, &run).ok());
  v1::JoinReply joined;
  *joined.mutable_job() = *MakeJobConfig("synthetic", 1, run);
  joined.set_rank(0);
  joined.set_world_size(1);
  return joined;
}

TEST(SyntheticRunnerTest, EachGroupIsExchangedWhileTheBackwardPassContinues) {
  KeepFreedMemoryMapped();  // as the worker daemon does
  // A backward pass of about 500 ms (20 ns per element, ten times the flag's
  // default) against exchanges of a few ms each (dense, one rank; up to 60 ms
  // on a loaded machine).
  const v1::JoinReply joined = JoinedResNet("dense_allreduce", "dense", "4", 20.0);
  ASSERT_EQ(joined.job().groups_size(), 4);
  ASSERT_EQ(joined.job().run().layer_sizes_size(), 161);
  const std::vector<absl::Status> statuses = RunOnLocalGlooGroup(1, [&](Collective& collective) {
    absl::StatusOr<std::unique_ptr<CollectiveScheme>> scheme = CollectiveScheme::Create(joined.job(), &collective);
    if (!scheme.ok()) return scheme.status();
    SyntheticConfig config;
    config.joined = joined;
    absl::StatusOr<std::unique_ptr<SyntheticRunner>> runner = SyntheticRunner::Create(config, scheme->get());
    if (!runner.ok()) return runner.status();
    absl::StatusOr<TrainingSummary> summary = (*runner)->Run(nullptr);
    if (!summary.ok()) return summary.status();
    EXPECT_EQ(summary->steps, 3);
    EXPECT_EQ(summary->final_test_accuracy, -1);
    EXPECT_EQ(summary->collective_steps, 3);
    // One rank sends nothing over the wire; the groups were still encoded.
    EXPECT_EQ(summary->bytes_sent_per_step, 0);
    // The last step's events: every group but the last starts before the
    // backward pass ends.
    std::map<int, int64_t> started;
    int64_t backward_end = -1;
    for (const PipelineEvent& e : (*runner)->pipeline().events()) {
      if (e.kind == PipelineEvent::Kind::kExchangeStart) started[e.group] = e.seq;
      if (e.kind == PipelineEvent::Kind::kBackwardEnd) backward_end = e.seq;
    }
    EXPECT_EQ(started.size(), 4u);
    EXPECT_GE(backward_end, 0);
    std::string order;
    for (const PipelineEvent& e : (*runner)->pipeline().events()) {
      absl::StrAppend(&order, PipelineEventName(e.kind), e.group >= 0 ? absl::StrCat("(", e.group, ")") : "",
                      " @", absl::ToInt64Milliseconds(e.time - (*runner)->pipeline().events().front().time), "ms ");
    }
    for (int g = 0; g < 3; ++g) {
      EXPECT_LT(started[g], backward_end) << "group " << g << " waited for the backward pass: " << order;
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(statuses[0].ok()) << statuses[0];
}

TEST(SyntheticRunnerTest, RefusesRunsThatAreNotTheProfiles) {
  v1::JoinReply joined = JoinedResNet("sketch_allreduce", "count_sketch:method=estimate,density=0.01,rows=1,width=5", "single");
  joined.mutable_job()->mutable_run()->set_layer_sizes(0, 7);
  const std::vector<absl::Status> statuses = RunOnLocalGlooGroup(1, [&](Collective& collective) {
    auto scheme = CollectiveScheme::Create(joined.job(), &collective);
    if (!scheme.ok()) return scheme.status();
    SyntheticConfig config;
    config.joined = joined;
    absl::StatusOr<std::unique_ptr<SyntheticRunner>> runner = SyntheticRunner::Create(config, scheme->get());
    EXPECT_EQ(runner.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(runner.status().message().find("layer 0 of the run has 7 elements"), std::string::npos)
        << runner.status();
    config.joined.mutable_job()->mutable_run()->set_workload("mlp");
    EXPECT_EQ(SyntheticRunner::Create(config, scheme->get()).status().code(), absl::StatusCode::kInvalidArgument);
    return absl::OkStatus();
  });
  ASSERT_TRUE(statuses[0].ok()) << statuses[0];
}

TEST(WorkloadsTest, DescribesBothKindsAndRefusesUnknownOnes) {
  v1::RunConfig run;
  run.set_workload("gpt2_small");
  run.set_synthetic_steps(4);
  ASSERT_TRUE(DescribeRun(8, &run).ok());
  EXPECT_EQ(run.layer_sizes_size(), 148);
  EXPECT_EQ(run.steps_per_epoch(), 4u);
  run.set_synthetic_steps(0);
  EXPECT_EQ(DescribeRun(8, &run).code(), absl::StatusCode::kInvalidArgument);
  run.set_synthetic_steps(4);
  run.set_backward_ns_per_element(-1);
  EXPECT_EQ(DescribeRun(8, &run).code(), absl::StatusCode::kInvalidArgument);
  run.set_workload("mlp");
  run.set_batch_size(32);
  ASSERT_TRUE(DescribeRun(4, &run).ok());
  EXPECT_EQ(run.steps_per_epoch(), 60000u / 4 / 32);
  run.set_workload("alexnet");
  const absl::Status unknown = DescribeRun(4, &run);
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("mlp, cnn, mlp_large, cnn_wide, char_lm, resnet50, vgg16, bert_base, gpt2_small"),
            std::string::npos)
      << unknown;
  EXPECT_TRUE(IsSyntheticWorkload("vgg16"));
  EXPECT_FALSE(IsSyntheticWorkload("cnn"));
}

}  // namespace
}  // namespace sketchfuse
