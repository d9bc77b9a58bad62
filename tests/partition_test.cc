// A network partition, for real: worker-1 runs in a network namespace of
// the test's own, joined to the servers by a veth pair; the test takes the
// link down mid-training for 3 s, so worker-1's packets (and the servers'
// replies to it) are dropped and its connections stall, then brings it up.
// Meanwhile worker-0's rounds outlast the round deadline and are re-pushed;
// after the link is back, TCP delivers what was stalled and training goes
// on. The promise: the run ends EXACTLY where the same run without the
// partition ends, on both workers.
//
// Needs root with CAP_NET_ADMIN outside Bazel's sandbox (the target is
// tagged no-sandbox); it skips, saying why, where namespaces cannot be made.
// Usage (from Bazel): partition_test <sketchfuse_server> <sketchfuse_worker>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/netns_link.h"
#include "tests/process_util.h"
#include "tests/training_cluster.h"

namespace sketchfuse {
namespace {

std::vector<std::string> RunFlags() {
  return {"--job=partition",  "--world_size=2", "--workload=mlp",    "--scheme=sketch_ps",
          "--train_examples=12000", "--test_examples=10000", "--epochs=2", "--batch_size=32",
          "--seed=13",        "--report_every=10", "--round_deadline_ms=400", "--fusion=2"};
}

const std::vector<std::string> kPatientWorker = {"--push_attempts=12"};

// Trains with the servers on the link's test end and worker-1 inside the
// namespace; `partition` cuts the link for `cut` once worker-1 is at step
// 100.
std::vector<WorkerResult> Train(NetnsLink& link, const std::string& name, std::chrono::milliseconds cut,
                                std::string* worker0_out) {
  TrainingCluster cluster(daemon_binaries.server, daemon_binaries.worker, absl::StrCat(TestTempDir(), "/", name), RunFlags());
  cluster.SetHost(link.host_address());
  cluster.SetServerFlags({"--state_dir=" + cluster.dir() + "/state"});
  if (cluster.StartServers(2).empty()) return {};
  cluster.StartWorker(0, kPatientWorker);
  cluster.StartWorker(1, kPatientWorker, link.ExecPrefix());
  if (cut.count() > 0) {
    EXPECT_TRUE(cluster.WaitForWorkerOutput(1, " step 100/", std::chrono::seconds(120)))
        << ReadFileOrEmpty(cluster.dir() + "/worker1.err");
    EXPECT_TRUE(link.SetConnected(false).ok());
    std::this_thread::sleep_for(cut);
    EXPECT_TRUE(link.SetConnected(true).ok());
  }
  std::vector<WorkerResult> results = cluster.WaitForWorkers();
  cluster.StopServers(SIGTERM);
  *worker0_out = cluster.WorkerOut(0);
  return results;
}

TEST(PartitionTest, AWorkerCutOffForThreeSecondsLosesNoStep) {
  absl::StatusOr<std::unique_ptr<NetnsLink>> link = NetnsLink::Create("part");
  if (!link.ok()) GTEST_SKIP() << "no network namespace: " << link.status().message();
  std::string out;
  const std::vector<WorkerResult> reference = Train(**link, "connected", std::chrono::milliseconds(0), &out);
  ASSERT_EQ(reference.size(), 2u);
  ASSERT_FALSE(reference[0].last_epoch.empty());
  EXPECT_EQ(reference[1].last_epoch, reference[0].last_epoch);
  EXPECT_GT(reference[0].accuracy, 0.7) << "the reference run did not train: equality would prove little";

  const std::vector<WorkerResult> cut = Train(**link, "partitioned", std::chrono::milliseconds(3000), &out);
  ASSERT_EQ(cut.size(), 2u);
  for (int w = 0; w < 2; ++w) EXPECT_EQ(cut[w].last_epoch, reference[0].last_epoch) << "worker " << w;
  // Worker-0 waited out the partition by re-pushing rounds the shards failed.
  EXPECT_GT(cut[0].retried_pushes, 0) << out;
  std::printf("partitioned 3 s: both workers ended with the uninterrupted model (accuracy %.4f); worker-0 "
              "re-pushed %ld times\n", cut[0].accuracy, cut[0].retried_pushes);
}

}  // namespace
}  // namespace sketchfuse
