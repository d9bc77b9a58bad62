// Real training on the decentralized route and through failover, with real
// processes on loopback: sketchfuse_server (shard 0 serving the coordinator,
// whose key-value store is the Gloo rendezvous) and four sketchfuse_worker
// processes training the Fashion-MNIST MLP with Gloo collectives.
//
//  - Every decentralized scheme reaches a test accuracy within 2.5 points of
//    dense_allreduce (same seed, same steps, same optimizer settings, the
//    scheme's default compressor; one seed, see kOneSeedBound), and every worker of a run ends with the
//    same model. So does sketch_ps with the servers' second round (two
//    shards) and a 3-row sketch. importance_allreduce also with plain SGD
//    (momentum 0, learning rate 0.3) on both sides.
//  - --scheme=auto: every server is killed with SIGKILL mid-training; the
//    workers redo the failed groups with sketch_allreduce within their retry
//    budget and go on decentralized; the servers restart on the same ports and
//    the workers return to sketch_ps. Every worker takes every step exactly
//    once (the same number of steps, the same final model on every worker),
//    and the final accuracy is within 1 point of an uninterrupted auto run
//    (the allreduce adds the same sketches in another order, so the runs agree
//    to float rounding, not bit for bit). The worker's timeline shows both
//    routes, and its Prometheus metrics count steps on both.
// Usage (from Bazel): decentralized_training_test <sketchfuse_server> <sketchfuse_worker>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/process_util.h"
#include "tests/training_cluster.h"

namespace sketchfuse {
namespace {

constexpr int kWorld = 4;
constexpr int kSteps = 2 * (24000 / kWorld / 32);  // 2 epochs of 24000 examples, batch 32
// How far below dense_allreduce one run of a compressing scheme may end. One
// seed's gap is noisy: sketch_allreduce ends 0.04, 1.84 and 1.35 points below
// dense on three seeds of the 4-worker MLP (docs/BENCHMARKS.md, the release_cap
// table; the three-seed means of every scheme are within 1.5: "Training quality
// at 4 workers, 10x to 300x"), and the trajectory follows the CPU's BLAS
// kernels (seed 5: sketch_allreduce 1.72 below on an Intel Xeon, within 1.5 on
// an AMD EPYC). A scheme that does not train ends far lower.
constexpr double kOneSeedBound = 0.025;

std::vector<std::string> RunFlags(const std::string& scheme) {
  return {"--job=train", absl::StrCat("--world_size=", kWorld), "--workload=mlp", "--scheme=" + scheme,
          "--train_examples=24000", "--test_examples=10000", "--epochs=2", "--batch_size=32", "--seed=5",
          "--report_every=0"};
}

TrainingCluster Cluster(const std::string& name, const std::string& scheme,
                        const std::vector<std::string>& extra = {}) {
  std::vector<std::string> flags = RunFlags(scheme);
  flags.insert(flags.end(), extra.begin(), extra.end());
  return TrainingCluster(daemon_binaries.server, daemon_binaries.worker, absl::StrCat(TestTempDir(), "/", name), flags);
}

void ExpectOneModel(const std::vector<WorkerResult>& results, const std::string& scheme) {
  ASSERT_EQ(results.size(), static_cast<size_t>(kWorld)) << scheme;
  for (int w = 0; w < kWorld; ++w) {
    EXPECT_EQ(results[w].steps, kSteps) << scheme << " worker " << w;
    EXPECT_EQ(results[w].last_epoch, results[0].last_epoch) << scheme << ": worker " << w << " has another model";
  }
}

TEST(DecentralizedTrainingTest, EverySchemeEndsNearDenseAllreduceAccuracy) {
  // One shard: it serves the coordinator (and the rendezvous); no gradient
  // goes through it.
  const std::vector<WorkerResult> dense = Cluster("dense_allreduce", "dense_allreduce").Train(kWorld, 1);
  ExpectOneModel(dense, "dense_allreduce");
  ASSERT_FALSE(dense.empty());
  EXPECT_EQ(dense[0].collective_steps, kSteps);
  EXPECT_GT(dense[0].accuracy, 0.80);
  std::printf("final test accuracy: dense_allreduce %.4f\n", dense[0].accuracy);
  for (const std::string scheme : {"dense_bf16_allreduce", "sketch_allreduce", "topk_allgather", "gtopk",
                                    "importance_allreduce", "spardl"}) {
    const std::vector<WorkerResult> results = Cluster(scheme, scheme).Train(kWorld, 1);
    ExpectOneModel(results, scheme);
    if (results.empty()) continue;
    std::printf("final test accuracy: %s %.4f\n", scheme.c_str(), results[0].accuracy);
    EXPECT_EQ(results[0].collective_steps, kSteps) << scheme;
    EXPECT_GE(results[0].accuracy, dense[0].accuracy - kOneSeedBound) << scheme;
  }
  // The centralized route's second round, on two shards, with a 3-row sketch
  // whose estimates alone train poorly (docs/BENCHMARKS.md): the servers
  // answer with the exact sums at the candidates.
  const std::vector<WorkerResult> second =
      Cluster("sketch_ps_second_round", "sketch_ps",
              {"--compressor=count_sketch:method=estimate,density=0.01,rows=3,width=10", "--second_round"})
          .Train(kWorld, 2);
  ExpectOneModel(second, "sketch_ps --second_round");
  if (!second.empty()) {
    std::printf("final test accuracy: sketch_ps --second_round (3 rows) %.4f\n", second[0].accuracy);
    EXPECT_EQ(second[0].collective_steps, 0);
    EXPECT_GE(second[0].accuracy, dense[0].accuracy - kOneSeedBound);
  }
}

TEST(DecentralizedTrainingTest, ImportanceAllreduceReachesDenseAllreduceAccuracyWithPlainSgd) {
  const std::vector<std::string> plain_sgd = {"--momentum=0", "--learning_rate=0.3"};
  const std::vector<WorkerResult> dense = Cluster("dense_plain", "dense_allreduce", plain_sgd).Train(kWorld, 1);
  const std::vector<WorkerResult> importance =
      Cluster("importance_plain", "importance_allreduce", plain_sgd).Train(kWorld, 1);
  ExpectOneModel(dense, "dense_allreduce");
  ExpectOneModel(importance, "importance_allreduce");
  ASSERT_FALSE(dense.empty());
  ASSERT_FALSE(importance.empty());
  std::printf("final test accuracy with plain SGD: dense_allreduce %.4f, importance_allreduce %.4f\n",
              dense[0].accuracy, importance[0].accuracy);
  EXPECT_GT(dense[0].accuracy, 0.80);
  EXPECT_GE(importance[0].accuracy, dense[0].accuracy - 0.015);
}

// Waits until every worker's output holds `text`; false after `timeout`.
bool WaitForEveryWorker(const TrainingCluster& cluster, const std::string& text, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int seen = 0;
    for (int w = 0; w < kWorld; ++w) seen += cluster.WorkerOut(w).find(text) != std::string::npos;
    if (seen == kWorld) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

TEST(FailoverTest, WorkersFallBackWhenEveryServerDiesAndReturnWhenTheServersRestart) {
  const std::vector<WorkerResult> reference = Cluster("auto_reference", "auto").Train(kWorld, 2);
  ExpectOneModel(reference, "auto (uninterrupted)");
  ASSERT_FALSE(reference.empty());
  EXPECT_EQ(reference[0].collective_steps, 0) << "an uninterrupted auto run stays on the servers";

  TrainingCluster cluster = Cluster("auto_failover", "auto");
  const std::vector<int> ports = FreePorts(2);
  ASSERT_FALSE(cluster.StartServers(2, ports).empty());
  const std::vector<std::string> flags = {"--report_every=10", "--probe_every=10", "--push_attempts=3",
                                          "--trace_steps=400"};
  for (int w = 0; w < kWorld; ++w) {
    std::vector<std::string> worker_flags = flags;
    worker_flags.push_back(absl::StrCat("--trace_file=", cluster.dir(), "/trace", w, ".json"));
    if (w == 0) worker_flags.push_back("--metrics_port=0");
    cluster.StartWorker(w, worker_flags);
  }
  ASSERT_TRUE(WaitForEveryWorker(cluster, absl::StrCat(" step 60/", kSteps), std::chrono::seconds(300)))
      << cluster.WorkerOut(0);
  cluster.StopServers(SIGKILL);
  ASSERT_TRUE(WaitForEveryWorker(cluster, "redoing them with sketch_allreduce", std::chrono::seconds(120)))
      << "the workers did not fail over:\n" << cluster.WorkerOut(0);
  ASSERT_FALSE(cluster.StartServers(2, ports).empty()) << "the servers did not restart on their ports";
  // Worker 0's metrics, scraped while it trains, count steps on both routes.
  std::smatch port;
  const std::string out0 = cluster.WorkerOut(0);
  ASSERT_TRUE(std::regex_search(out0, port, std::regex("serves metrics on 127.0.0.1:([0-9]+)"))) << out0;
  const std::string scrape = HttpGet(std::stoi(port[1]), "/metrics");
  EXPECT_GE(MetricValue(scrape, "sketchfuse_worker_steps_total{route=\"decentralized\"}"), 1) << scrape;
  EXPECT_GE(MetricValue(scrape, "sketchfuse_worker_steps_total{route=\"centralized\"}"), 60) << scrape;
  EXPECT_GT(MetricValue(scrape, "sketchfuse_worker_bytes_sent_total"), 0) << scrape;
  EXPECT_GT(MetricValue(scrape, "sketchfuse_worker_bytes_received_total"), 0) << scrape;
  EXPECT_GT(MetricValue(scrape, "sketchfuse_worker_residual_norm"), 0) << scrape;
  const std::vector<WorkerResult> results = cluster.WaitForWorkers();
  cluster.StopServers(SIGTERM);

  ExpectOneModel(results, "auto (failover)");
  ASSERT_FALSE(results.empty());
  for (int w = 0; w < kWorld; ++w) {
    EXPECT_NE(cluster.WorkerOut(w).find("returning to sketch_ps"), std::string::npos)
        << "worker " << w << " did not return to the servers:\n" << cluster.WorkerOut(w);
  }
  EXPECT_GT(results[0].collective_steps, 0);
  EXPECT_LT(results[0].collective_steps, kSteps);
  std::printf("final test accuracy: auto uninterrupted %.4f, through failover %.4f (%ld of %d steps decentralized)\n",
              reference[0].accuracy, results[0].accuracy, results[0].collective_steps, kSteps);
  EXPECT_NEAR(results[0].accuracy, reference[0].accuracy, 0.01);
  // The timeline shows both routes: pushes to the servers, and collectives.
  const std::string trace = ReadFileOrEmpty(cluster.dir() + "/trace0.json");
  EXPECT_NE(trace.find("\"name\": \"push, server sum and decode\""), std::string::npos);
  EXPECT_NE(trace.find("\"route\": \"decentralized\""), std::string::npos);
  EXPECT_NE(trace.find("\"name\": \"backward\""), std::string::npos);
}

// The two-round fixed-size sketch at its default, decentralized (its two
// allreduces) and centralized (two pushes of real gRPC, the second of
// candidate values, to two shards). Its three-seed mean at four workers is
// 1.4 points below dense (docs/BENCHMARKS.md, "Scale out: 8 and 16 worker processes"), as
// sketch_allreduce's is, but it varies more by seed and this test's seed is
// its worst measured (80.09% against 84.80%): the margin here is 5 points,
// a guard against a collapse (a step-hashed table lost 12 at 16 workers),
// not the quality target.
TEST(DecentralizedTrainingTest, TheFixedSizeSketchTrainsOnBothRoutes) {
  const std::vector<WorkerResult> dense = Cluster("fixed_dense_allreduce", "dense_allreduce").Train(kWorld, 1);
  ExpectOneModel(dense, "dense_allreduce");
  ASSERT_FALSE(dense.empty());
  for (const auto& [scheme, shards] : {std::pair<std::string, int>{"fixed_sketch_allreduce", 1},
                                       std::pair<std::string, int>{"fixed_sketch_ps", 2}}) {
    const std::vector<WorkerResult> results = Cluster(scheme, scheme).Train(kWorld, shards);
    ExpectOneModel(results, scheme);
    if (results.empty()) continue;
    std::printf("final test accuracy: %s %.4f (dense_allreduce %.4f)\n", scheme.c_str(), results[0].accuracy,
                dense[0].accuracy);
    EXPECT_EQ(results[0].collective_steps, shards == 1 ? kSteps : 0) << scheme;
    EXPECT_GE(results[0].accuracy, dense[0].accuracy - 0.05) << scheme;
  }
}

}  // namespace
}  // namespace sketchfuse
