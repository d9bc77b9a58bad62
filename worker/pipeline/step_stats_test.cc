#include "worker/pipeline/step_stats.h"

#include <limits>

#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

absl::Time At(double ms) { return absl::UnixEpoch() + absl::Milliseconds(ms); }

TEST(PhasesOfTest, ClassesSpansByNameAndSumsOverGroups) {
  StepTimeline timeline;
  timeline.begin = At(0);
  timeline.backward_end = At(50);
  timeline.groups = {
      {{"compress", At(10), At(12)}, {"communicate", At(12), At(20)}, {"decode", At(20), At(21)}},
      {},  // a failed group adds nothing
      {{"compress", At(50), At(53)}, {"push, server sum and decode", At(53), At(70)},
       {"second round: exact values", At(70), At(74)}},
  };
  const StepPhases phases = PhasesOf(timeline);
  EXPECT_NEAR(phases.backward, 0.050, 1e-12);
  EXPECT_NEAR(phases.compress, 0.005, 1e-12);
  EXPECT_NEAR(phases.communicate, 0.008 + 0.017 + 0.004, 1e-12);
  EXPECT_NEAR(phases.decode, 0.001, 1e-12);
}

TEST(PhasesOfTest, ReversedTimesCountAsZero) {
  StepTimeline timeline;
  timeline.begin = At(10);
  timeline.backward_end = At(5);
  timeline.groups = {{{"compress", At(3), At(1)}}};
  const StepPhases phases = PhasesOf(timeline);
  EXPECT_EQ(phases.backward, 0);
  EXPECT_EQ(phases.compress, 0);
}

TEST(StepStatsTest, SteadyStateLeavesOutTheFirstStep) {
  StepStats stats(absl::Now());
  const double seconds[] = {9.0, 0.3, 0.1, 0.2, 0.4};
  for (int i = 0; i < 5; ++i) {
    StepPhases phases;
    phases.backward = i == 0 ? 5.0 : 0.05;
    phases.compress = i == 0 ? 5.0 : 0.01 * i;
    const StepReport report = stats.Add(i, seconds[i], 0, StepTraffic{}, phases);
    EXPECT_EQ(report.phases.compress, phases.compress);
  }
  TrainingSummary summary;
  stats.Summarize(5, &summary);
  EXPECT_EQ(summary.steady_steps, 4);
  EXPECT_NEAR(summary.median_step_seconds, 0.25, 1e-12);  // of 0.1 0.2 0.3 0.4
  EXPECT_NEAR(summary.mean_phases.backward, 0.05, 1e-12);
  EXPECT_NEAR(summary.mean_phases.compress, (0.01 + 0.02 + 0.03 + 0.04) / 4, 1e-12);
  EXPECT_NEAR(summary.mean_step_seconds, 10.0 / 5, 1e-12);  // the mean keeps every step
}

TEST(StepStatsTest, OneStepIsItsOwnSteadyState) {
  StepStats stats(absl::Now());
  stats.Add(0, 0.7, 0, StepTraffic{}, StepPhases{0.1, 0.2, 0.3, 0.4});
  TrainingSummary summary;
  stats.Summarize(1, &summary);
  EXPECT_EQ(summary.steady_steps, 1);
  EXPECT_EQ(summary.median_step_seconds, 0.7);
  EXPECT_EQ(summary.mean_phases.decode, 0.4);
}

TEST(StepStatsTest, TrafficIsCountedBothWays) {
  StepStats stats(absl::Now());
  StepTraffic traffic;
  traffic.bytes_sent = 1000;
  traffic.bytes_received = 3000;
  traffic.dense_bytes = 10000;
  const StepReport report = stats.Add(0, 0.1, 0, traffic);
  EXPECT_EQ(report.bytes_sent, 1000u);
  EXPECT_EQ(report.bytes_received, 3000u);
  traffic.bytes_received = 5000;
  stats.Add(1, 0.1, 0, traffic);
  const Progress window = stats.TakeWindow(1, 1, 0);
  EXPECT_EQ(window.bytes_sent_per_step, 1000);
  EXPECT_EQ(window.bytes_received_per_step, 4000);
  EXPECT_EQ(window.compression_ratio, 10);  // dense over sent
  TrainingSummary summary;
  stats.Summarize(2, &summary);
  EXPECT_EQ(summary.bytes_received_per_step, 4000);
  EXPECT_NE(SummaryJson(SummaryHeader(), summary).find("\"bytes_received_per_step\": 4000.0"), std::string::npos)
      << SummaryJson(SummaryHeader(), summary);
}

TEST(StepStatsTest, NoStepsNoSteadyState) {
  StepStats stats(absl::Now());
  TrainingSummary summary;
  stats.Summarize(0, &summary);
  EXPECT_EQ(summary.steady_steps, 0);
  EXPECT_EQ(summary.median_step_seconds, 0);
}

// The summary through protobuf's JSON parser (which refuses NaN, -nan and
// every other token that is not JSON), as a google.protobuf.Struct.
google::protobuf::Struct ParseJson(const std::string& json) {
  google::protobuf::Struct parsed;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &parsed);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << json;
  return parsed;
}

SummaryHeader Header() {
  SummaryHeader h;
  h.worker = "worker-1";
  h.rank = 1;
  h.workload = "mlp";
  h.scheme = "dense_allreduce";
  h.compressor = "dense";
  h.fusion = "optimal";
  h.run = "0123abcd";
  return h;
}

TEST(SummaryJsonTest, ACompleteRunIsValidJsonWithItsCurve) {
  TrainingSummary summary;
  summary.steps = 50;
  summary.final_test_accuracy = 0.8125;
  summary.wall_seconds = 12.5;
  summary.eval_seconds = 0.75;
  Progress epoch;
  epoch.epoch = 1;
  epoch.step = 50;
  epoch.train_loss = 0.6;
  epoch.test_loss = 0.5;
  epoch.test_accuracy = 0.8;
  summary.epochs.push_back(epoch);
  summary.curve.push_back({25, 6.0, 0.7, 0.9, 1000});
  summary.curve.push_back({50, 12.0, 0.81, 0.55, 2000});
  const google::protobuf::Struct s = ParseJson(SummaryJson(Header(), summary));
  const auto& f = s.fields();
  EXPECT_EQ(f.at("worker").string_value(), "worker-1");
  EXPECT_EQ(f.at("steps").number_value(), 50);
  EXPECT_EQ(f.at("final_test_accuracy").number_value(), 0.8125);
  EXPECT_TRUE(f.at("diverged").has_null_value());
  EXPECT_EQ(f.at("eval_s").number_value(), 0.75);
  ASSERT_EQ(f.at("curve").list_value().values_size(), 2);
  const auto& point = f.at("curve").list_value().values(1).struct_value().fields();
  EXPECT_EQ(point.at("step").number_value(), 50);
  EXPECT_EQ(point.at("elapsed_s").number_value(), 12.0);
  EXPECT_EQ(point.at("test_accuracy").number_value(), 0.81);
  EXPECT_EQ(point.at("bytes_sent").number_value(), 2000);
  EXPECT_EQ(f.at("epochs").list_value().values(0).struct_value().fields().at("test_accuracy").number_value(), 0.8);
}

TEST(SummaryJsonTest, ADivergedRunIsValidJsonWithNullsAndSaysWhere) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  TrainingSummary summary;
  summary.steps = 3;
  summary.final_test_accuracy = nan;
  summary.mean_step_seconds = inf;
  Progress window;
  window.train_loss = nan;
  window.test_loss = -inf;
  window.test_accuracy = 0.1;
  summary.epochs.push_back(window);
  summary.curve.push_back({2, 1.0, 0.1, nan, 10});
  Divergence d;
  d.step = 3;
  d.group = 2;
  d.worker = "worker-0";
  d.what = "gradient";
  d.index = 17;
  d.value = nan;
  summary.diverged = d;
  SummaryHeader header = Header();
  header.compressor = "odd \"spec\" \\ with\ttabs";  // escaped, not trusted
  const std::string json = SummaryJson(header, summary);
  for (const char* bare : {": nan", ": -nan", ": inf", ": -inf"}) EXPECT_EQ(json.find(bare), std::string::npos) << json;
  const google::protobuf::Struct s = ParseJson(json);
  const auto& f = s.fields();
  EXPECT_TRUE(f.at("final_test_accuracy").has_null_value());
  EXPECT_TRUE(f.at("mean_step_s").has_null_value());
  EXPECT_EQ(f.at("compressor").string_value(), header.compressor);
  const auto& epoch = f.at("epochs").list_value().values(0).struct_value().fields();
  EXPECT_TRUE(epoch.at("train_loss").has_null_value());
  EXPECT_TRUE(epoch.at("test_loss").has_null_value());
  EXPECT_TRUE(f.at("curve").list_value().values(0).struct_value().fields().at("test_loss").has_null_value());
  const auto& diverged = f.at("diverged").struct_value().fields();
  EXPECT_EQ(diverged.at("step").number_value(), 3);
  EXPECT_EQ(diverged.at("group").number_value(), 2);
  EXPECT_EQ(diverged.at("worker").string_value(), "worker-0");
  EXPECT_EQ(diverged.at("what").string_value(), "gradient");
  EXPECT_EQ(diverged.at("index").number_value(), 17);
  EXPECT_EQ(diverged.at("message").string_value(), d.Describe());

  // A loss has no group and no index: null.
  d.group = -1;
  d.index = -1;
  d.what = "loss";
  summary.diverged = d;
  const google::protobuf::Struct loss_summary = ParseJson(SummaryJson(Header(), summary));
  const auto& loss = loss_summary.fields().at("diverged").struct_value().fields();
  EXPECT_TRUE(loss.at("group").has_null_value());
  EXPECT_TRUE(loss.at("index").has_null_value());
}

TEST(SummaryJsonTest, JsonNumberWritesNullForWhatJsonCannotHold) {
  EXPECT_EQ(JsonNumber(0.5, 3), "0.500");
  EXPECT_EQ(JsonNumber(-1, 6), "-1.000000");
  EXPECT_EQ(JsonNumber(std::numeric_limits<double>::quiet_NaN(), 3), "null");
  EXPECT_EQ(JsonNumber(-std::numeric_limits<double>::infinity(), 3), "null");
}

// The summary's warnings after a run: each names its figure and its bound,
// and says nothing on either side of the bound where there is nothing to say.
TEST(SummaryWarningsTest, PeelRecoveryWarnsUnderNinetyPercentOnly) {
  EXPECT_EQ(PeelRecoveryWarning(-1), "");  // no peeled sketch sent
  EXPECT_EQ(PeelRecoveryWarning(0.9), "");
  EXPECT_EQ(PeelRecoveryWarning(1.0), "");
  const std::string w = PeelRecoveryWarning(0.456);
  EXPECT_NE(w.find("45.6%"), std::string::npos) << w;
  EXPECT_NE(w.find("under 90%"), std::string::npos) << w;
}

TEST(SummaryWarningsTest, ChanceAccuracyWarnsAtOrUnderElevenPercentOfTenClasses) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(ChanceAccuracyWarning(0.8890, 10), "");
  EXPECT_EQ(ChanceAccuracyWarning(0.1101, 10), "");
  EXPECT_EQ(ChanceAccuracyWarning(-1, 10), "");   // no test set
  EXPECT_EQ(ChanceAccuracyWarning(nan, 10), "");  // diverged: reported on its own
  EXPECT_EQ(ChanceAccuracyWarning(0.05, 0), "");  // no classes: no chance to compare with
  // Top-k allgather at 256 workers and 100x on the wide CNN ended here
  // without its loss passing the bound (bench/results/scale_study).
  const std::string w = ChanceAccuracyWarning(0.0257, 10);
  EXPECT_NE(w.find("2.57%"), std::string::npos) << w;
  EXPECT_NE(w.find("11.00%"), std::string::npos) << w;
  EXPECT_NE(w.find("10 classes"), std::string::npos) << w;
  EXPECT_NE(ChanceAccuracyWarning(0.11, 10), "");     // the bound itself is at chance
  EXPECT_NE(ChanceAccuracyWarning(0.5, 2), "");       // two classes: 55% is the bound
  EXPECT_EQ(ChanceAccuracyWarning(0.56, 2), "");
}

TEST(SummaryWarningsTest, EndOfRunWarningsAppendPeelThenChanceAfterTheJoinsOwn) {
  TrainingSummary summary;
  summary.warnings = {"from the join"};
  summary.peel_recovered_share = 0.5;
  summary.final_test_accuracy = 0.05;
  AddEndOfRunWarnings(10, &summary);
  ASSERT_EQ(summary.warnings.size(), 3u);
  EXPECT_EQ(summary.warnings[0], "from the join");
  EXPECT_EQ(summary.warnings[1], PeelRecoveryWarning(0.5));
  EXPECT_EQ(summary.warnings[2], ChanceAccuracyWarning(0.05, 10));

  TrainingSummary quiet;  // recovered all, learned, or nothing to judge: nothing added
  quiet.peel_recovered_share = -1;
  quiet.final_test_accuracy = 0.85;
  AddEndOfRunWarnings(10, &quiet);
  quiet.final_test_accuracy = -1;
  AddEndOfRunWarnings(0, &quiet);
  EXPECT_TRUE(quiet.warnings.empty());
}

}  // namespace
}  // namespace sketchfuse
