// Divergence is caught, never trained through, with real processes on
// loopback (sketchfuse_server shards, one serving the coordinator, and
// sketchfuse_worker processes training the Fashion-MNIST MLP):
//
//  - A learning rate of 1e6 makes the run diverge within a few steps, on the
//    decentralized route (dense_allreduce) and on the centralized one
//    (sketch_ps): every worker exits with the divergence status (3), and its
//    JSON summary (read with protobuf's JSON parser, which refuses NaN)
//    names the step, the worker and what was not finite, with a null final
//    accuracy.
//  - One worker's gradient turns NaN (--inject_nan_gradient_at_step, a
//    test-only fault) while the others are healthy: it never sends it, and
//    the others, waiting on it in a server round or a collective, stop too.
//    The round deadline, the push deadline and the collective timeout are
//    set far beyond the test's patience, so they stop because the job told
//    them (the divergence notice through the coordinator, or the diverged
//    worker's departure), and every summary names worker-1's step and group.
// Usage (from Bazel): divergence_test <sketchfuse_server> <sketchfuse_worker>
#include <signal.h>

#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/process_util.h"
#include "tests/training_cluster.h"

namespace sketchfuse {
namespace {

constexpr int kWorld = 3;
constexpr int kDiverged = 3;  // sketchfuse_worker's exit status for a diverged run
// How long a worker may take to stop once its job diverged. Generous on a
// loaded machine; far below every deadline the runs are given, so a worker
// that waited for one fails the test.
constexpr std::chrono::seconds kPatience(90);
constexpr char kFarDeadlines[] = "600";

// 1200 examples over 3 workers in batches of 16: 25 steps in the epoch.
std::vector<std::string> RunFlags(const std::string& scheme, const std::vector<std::string>& extra) {
  std::vector<std::string> flags = {"--job=diverge", absl::StrCat("--world_size=", kWorld), "--workload=mlp",
                                    "--scheme=" + scheme, "--train_examples=1200", "--test_examples=500",
                                    "--epochs=1", "--batch_size=16", "--seed=5", "--report_every=0",
                                    absl::StrCat("--round_deadline_ms=", kFarDeadlines, "000")};
  flags.insert(flags.end(), extra.begin(), extra.end());
  return flags;
}

// A worker's summary file, parsed as JSON (a test failure if it is missing or
// not JSON).
google::protobuf::Struct Summary(const TrainingCluster& cluster, int w) {
  const std::string path = absl::StrCat(cluster.dir(), "/summary", w, ".json");
  const std::string text = ReadFileOrEmpty(path);
  google::protobuf::Struct summary;
  EXPECT_FALSE(text.empty()) << "worker " << w << " wrote no summary; its output:\n" << cluster.WorkerOut(w);
  const auto parsed = google::protobuf::util::JsonStringToMessage(text, &summary);
  EXPECT_TRUE(parsed.ok()) << "worker " << w << "'s summary is not JSON (" << parsed.ToString() << "):\n" << text;
  return summary;
}

// Starts the servers and kWorld workers, waits for every worker to exit and
// returns their exit codes; `extra_for` adds flags to one worker.
std::vector<int> RunToTheEnd(TrainingCluster& cluster, int shards,
                             const std::vector<std::vector<std::string>>& extra_for = {}) {
  std::vector<int> codes;
  if (cluster.StartServers(shards).empty()) return codes;
  std::vector<pid_t> pids;
  for (int w = 0; w < kWorld; ++w) {
    std::vector<std::string> flags = {absl::StrCat("--summary_json=", cluster.dir(), "/summary", w, ".json"),
                                      absl::StrCat("--collective_timeout_s=", kFarDeadlines),
                                      absl::StrCat("--push_timeout_s=", kFarDeadlines)};
    if (w < static_cast<int>(extra_for.size())) flags.insert(flags.end(), extra_for[w].begin(), extra_for[w].end());
    pids.push_back(cluster.StartWorker(w, flags));
  }
  for (int w = 0; w < kWorld; ++w) {
    codes.push_back(cluster.WaitForWorkerExit(pids[w], kPatience));
    EXPECT_EQ(codes.back(), kDiverged) << "worker " << w << " (-1: still running after " << kPatience.count()
                                       << " s, killed); its output:\n"
                                       << cluster.WorkerOut(w) << ReadFileOrEmpty(absl::StrCat(cluster.dir(), "/worker", w, ".err"));
  }
  cluster.StopServers(SIGTERM);
  return codes;
}

void ExpectDivergedAtAHugeLearningRate(const std::string& scheme, int shards) {
  TrainingCluster cluster(daemon_binaries.server, daemon_binaries.worker,
                          absl::StrCat(TestTempDir(), "/huge_lr_", scheme), RunFlags(scheme, {"--learning_rate=1e6"}));
  ASSERT_EQ(RunToTheEnd(cluster, shards).size(), static_cast<size_t>(kWorld));
  for (int w = 0; w < kWorld; ++w) {
    const google::protobuf::Struct summary = Summary(cluster, w);
    const auto& f = summary.fields();
    ASSERT_TRUE(f.count("diverged") && f.at("diverged").has_struct_value()) << scheme << " worker " << w;
    const auto& d = f.at("diverged").struct_value().fields();
    const double step = d.at("step").number_value();
    // Diverged within the epoch, after at least one applied step.
    EXPECT_GE(step, 1) << scheme << " worker " << w;
    EXPECT_LT(step, 25) << scheme << " worker " << w;
    EXPECT_EQ(f.at("steps").number_value(), step) << "steps done before the divergence";
    EXPECT_TRUE(f.at("final_test_accuracy").has_null_value()) << scheme << " worker " << w;
    const std::string what = d.at("what").string_value();
    EXPECT_TRUE(what == "loss" || what == "gradient" || what == "update") << what;
    EXPECT_EQ(d.at("worker").string_value().rfind("worker-", 0), 0u) << d.at("worker").string_value();
    const std::string message = d.at("message").string_value();
    EXPECT_NE(message.find(absl::StrCat("diverged at step ", static_cast<long>(step))), std::string::npos) << message;
    EXPECT_NE(cluster.WorkerOut(w).find(message), std::string::npos) << "the summary printed is the one written";
    const std::string err = ReadFileOrEmpty(absl::StrCat(cluster.dir(), "/worker", w, ".err"));
    EXPECT_NE(err.find(absl::StrCat("worker-", w, " stopped: ")), std::string::npos) << err;
  }
}

TEST(DivergenceTest, DenseAllreduceAtAHugeLearningRateStopsEveryWorkerWithASummary) {
  ExpectDivergedAtAHugeLearningRate("dense_allreduce", 1);
}

TEST(DivergenceTest, SketchPsAtAHugeLearningRateStopsEveryWorkerWithASummary) {
  ExpectDivergedAtAHugeLearningRate("sketch_ps", 2);
}

void ExpectOneWorkersNanStopsEveryWorker(const std::string& scheme, int shards) {
  constexpr int kStep = 4;
  TrainingCluster cluster(daemon_binaries.server, daemon_binaries.worker,
                          absl::StrCat(TestTempDir(), "/one_nan_", scheme), RunFlags(scheme, {}));
  ASSERT_EQ(RunToTheEnd(cluster, shards, {{}, {absl::StrCat("--inject_nan_gradient_at_step=", kStep)}}).size(),
            static_cast<size_t>(kWorld));
  for (int w = 0; w < kWorld; ++w) {
    const google::protobuf::Struct summary = Summary(cluster, w);
    const auto& f = summary.fields();
    ASSERT_TRUE(f.count("diverged") && f.at("diverged").has_struct_value()) << scheme << " worker " << w;
    const auto& d = f.at("diverged").struct_value().fields();
    EXPECT_EQ(d.at("step").number_value(), kStep) << scheme << " worker " << w;
    EXPECT_EQ(d.at("worker").string_value(), "worker-1") << scheme << " worker " << w;
    EXPECT_EQ(d.at("what").string_value(), "gradient") << scheme << " worker " << w;
    EXPECT_EQ(d.at("index").number_value(), 0) << scheme << " worker " << w;
    EXPECT_TRUE(d.at("group").has_number_value()) << scheme << " worker " << w;
    EXPECT_EQ(f.at("steps").number_value(), kStep) << scheme << " worker " << w;
  }
  // The healthy workers say why they stopped.
  for (int w : {0, 2}) {
    const std::string err = ReadFileOrEmpty(absl::StrCat(cluster.dir(), "/worker", w, ".err"));
    EXPECT_NE(err.find(absl::StrCat("worker-", w, " stopped: worker-1 diverged at step ", kStep, ": group ")),
              std::string::npos)
        << err;
  }
}

TEST(DivergenceTest, OneWorkersNanGradientStopsEveryWorkerOnTheServers) {
  ExpectOneWorkersNanStopsEveryWorker("sketch_ps", 2);
}

TEST(DivergenceTest, OneWorkersNanGradientStopsEveryWorkerInTheCollectives) {
  ExpectOneWorkersNanStopsEveryWorker("dense_allreduce", 1);
}

}  // namespace
}  // namespace sketchfuse
