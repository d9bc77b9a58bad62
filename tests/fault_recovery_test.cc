// Faults on the centralized route, with real processes on loopback: two
// sketchfuse_server shards (shard 0 serving the coordinator, both with a
// --state_dir) and two sketchfuse_worker processes training the
// Fashion-MNIST MLP with sketch_ps. Each test injects one fault and promises
// that the run ends EXACTLY where the same run without the fault ends (the
// same test loss and accuracy, to the last printed digit, on every worker):
// no step is lost and none is applied twice.
//
//  - One shard killed with SIGKILL mid-training and restarted on its port:
//    the workers re-push what failed; rounds the dead shard had finished are
//    answered from its journal.
//  - The shard serving the coordinator killed and restarted: the workers and
//    the other shard register with the new coordinator again, and a worker
//    killed afterwards resumes from its checkpoint with its rank.
//  - A straggler whose pushes are delayed past the round deadline: the shard
//    fails those rounds, the on-time worker re-pushes, and the straggler
//    joins the fresh round.
// And a worker's checkpoint as hostile input: corrupt, truncated or another
// run's, it is refused by name and left as it was.
// Usage (from Bazel): fault_recovery_test <sketchfuse_server> <sketchfuse_worker>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
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

constexpr int kWorkers = 2;
constexpr int kShards = 2;

// Flags every process of the run shares. The round deadline (in the job
// config) is short so that the straggler's delayed pushes outlast it; two
// fusion groups, so that each shard owns some.
std::vector<std::string> RunFlags() {
  return {"--job=faults",        absl::StrCat("--world_size=", kWorkers), "--workload=mlp", "--scheme=sketch_ps",
          "--train_examples=12000", "--test_examples=10000", "--epochs=2", "--batch_size=32",
          "--seed=9",            "--report_every=10", "--round_deadline_ms=400", "--fusion=2"};
}

// A budget that outlasts a shard's restart (backoff 0.1 s doubling to 2 s).
const std::vector<std::string> kPatientWorker = {"--push_attempts=10"};

TrainingCluster Cluster(const std::string& name) {
  TrainingCluster cluster(daemon_binaries.server, daemon_binaries.worker, absl::StrCat(TestTempDir(), "/", name), RunFlags());
  cluster.SetServerFlags({"--state_dir=" + cluster.dir() + "/state"});
  return cluster;
}

// The uninterrupted run every test compares with (computed once).
const WorkerResult& Reference() {
  static const WorkerResult* reference = [] {
    TrainingCluster cluster = Cluster("reference");
    const std::vector<WorkerResult> results = cluster.Train(kWorkers, kShards, kPatientWorker);
    EXPECT_EQ(results.size(), static_cast<size_t>(kWorkers));
    auto* kept = new WorkerResult(results.empty() ? WorkerResult{} : results[0]);
    for (const WorkerResult& r : results) EXPECT_EQ(r.last_epoch, kept->last_epoch);
    EXPECT_GT(kept->accuracy, 0.7) << "the reference run did not train: equality would prove little";
    std::printf("reference run: final test accuracy %.4f after %ld steps\n", kept->accuracy, kept->steps);
    return kept;
  }();
  return *reference;
}

long KeptAnswersTakenUp(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("([0-9]+) kept answers taken up"))) return -1;
  return std::stol(m[1]);
}

void ExpectExactlyTheReference(const std::vector<WorkerResult>& results) {
  const WorkerResult& reference = Reference();
  ASSERT_FALSE(reference.last_epoch.empty());
  ASSERT_EQ(results.size(), static_cast<size_t>(kWorkers));
  for (int w = 0; w < kWorkers; ++w) {
    EXPECT_EQ(results[w].last_epoch, reference.last_epoch) << "worker " << w;
  }
}

TEST(FaultRecoveryTest, AShardKilledMidRoundAndRestartedLosesNoStep) {
  Reference();
  TrainingCluster cluster = Cluster("shard_killed");
  ASSERT_FALSE(cluster.StartServers(kShards).empty());
  for (int w = 0; w < kWorkers; ++w) cluster.StartWorker(w, kPatientWorker);
  ASSERT_TRUE(cluster.WaitForWorkerOutput(0, " step 100/", std::chrono::seconds(120)));
  EXPECT_EQ(cluster.KillServer(1), 128 + SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // pushes fail meanwhile
  ASSERT_TRUE(cluster.RestartServer(1));
  const std::vector<WorkerResult> results = cluster.WaitForWorkers();
  const std::string restarted = cluster.ServerOut(1);
  cluster.StopServers(SIGTERM);
  ExpectExactlyTheReference(results);
  // The successor took up its predecessor's answers, and pushes were retried.
  EXPECT_GT(KeptAnswersTakenUp(restarted), 0) << restarted;
  long retried = 0;
  for (int w = 0; w < kWorkers; ++w) retried += ParseSummary(cluster.WorkerOut(w)).retried_pushes;
  EXPECT_GT(retried, 0) << "no push was retried: the shard was not killed mid-training";
  std::printf("shard 1 killed and restarted: %ld kept answers taken up, %ld pushes retried, the same model\n",
              KeptAnswersTakenUp(restarted), retried);
}

TEST(FaultRecoveryTest, TheCoordinatorRestartsAndAWorkerKilledAfterwardsGetsItsRankBack) {
  Reference();
  TrainingCluster cluster = Cluster("coordinator_restarted");
  std::filesystem::create_directories(cluster.dir() + "/ckpt");
  const std::vector<std::string> flags = {"--push_attempts=10", "--checkpoint_dir=" + cluster.dir() + "/ckpt",
                                          "--checkpoint_every=4"};
  ASSERT_FALSE(cluster.StartServers(kShards).empty());
  cluster.StartWorker(0, flags);
  const pid_t second = cluster.StartWorker(1, flags);
  ASSERT_TRUE(cluster.WaitForWorkerOutput(0, " step 60/", std::chrono::seconds(120)));
  // Shard 0 serves the coordinator: both go down and come back.
  EXPECT_EQ(cluster.KillServer(0), 128 + SIGKILL);
  ASSERT_TRUE(cluster.RestartServer(0));
  // Within a heartbeat (2 s) the workers join the new coordinator again and
  // shard 1 registers again. Then worker-1 dies and restarts: its join is
  // answered only by a coordinator that knows the whole job again.
  ASSERT_TRUE(cluster.WaitForWorkerOutput(0, " step 160/", std::chrono::seconds(120)));
  EXPECT_EQ(cluster.KillWorker(second), 128 + SIGKILL);
  std::rename((cluster.dir() + "/worker1.out").c_str(), (cluster.dir() + "/worker1.killed.out").c_str());
  cluster.StartWorker(1, flags);
  const std::vector<WorkerResult> results = cluster.WaitForWorkers();
  cluster.StopServers(SIGTERM);
  ExpectExactlyTheReference(results);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_GT(results[1].resumed_from, 0) << "the restarted worker did not resume from its checkpoint";
  EXPECT_NE(cluster.WorkerOut(1).find("joined job 'faults' as rank 1"), std::string::npos) << cluster.WorkerOut(1);
  EXPECT_NE(cluster.WorkerOut(0).find("joined the restarted coordinator again"), std::string::npos)
      << cluster.WorkerOut(0);
}

TEST(FaultRecoveryTest, AStragglerPastTheRoundDeadlineIsWaitedForByRePushing) {
  Reference();
  TrainingCluster cluster = Cluster("straggler");
  ASSERT_FALSE(cluster.StartServers(kShards).empty());
  // 1% of worker-1's pushes leave 700 ms late; the shards fail those rounds
  // at 400 ms.
  cluster.StartWorker(0, kPatientWorker);
  cluster.StartWorker(1, {"--push_attempts=10", "--inject_faults=delay=0.01:700ms,seed=4"});
  const std::vector<WorkerResult> results = cluster.WaitForWorkers();
  cluster.StopServers(SIGTERM);
  ExpectExactlyTheReference(results);
  EXPECT_GT(results[0].retried_pushes, 0)
      << "the on-time worker re-pushed nothing: no round outlasted its deadline";
  std::printf("straggler: the on-time worker re-pushed %ld times, the same model\n",
              results[0].retried_pushes);
}

// A checkpoint is a file a worker trusts at start: a corrupt, truncated or
// foreign one stops the worker with a message naming the file (exit 2); it
// never trains from a wrong state. A real one-worker run makes the files.
TEST(FaultRecoveryTest, ACorruptTruncatedOrForeignCheckpointIsRefusedByName) {
  auto flags = [](int seed) {
    return std::vector<std::string>{"--job=ckpt", "--world_size=1", "--workload=mlp", "--scheme=sketch_ps",
                                    "--train_examples=640", "--test_examples=500", "--epochs=1",
                                    "--batch_size=32", absl::StrCat("--seed=", seed), "--report_every=0"};
  };
  TrainingCluster mine(daemon_binaries.server, daemon_binaries.worker, TestTempDir() + "/ckpt_mine", flags(1));
  TrainingCluster other(daemon_binaries.server, daemon_binaries.worker, TestTempDir() + "/ckpt_other", flags(2));
  for (TrainingCluster* cluster : {&mine, &other}) {
    std::filesystem::create_directories(cluster->dir() + "/ckpt");
    const std::vector<WorkerResult> results =
        cluster->Train(1, 1, {"--checkpoint_dir=" + cluster->dir() + "/ckpt", "--checkpoint_every=4"});
    ASSERT_EQ(results.size(), 1u);
  }
  const std::string path = mine.dir() + "/ckpt/worker-0.ckpt";
  const std::string real = ReadFileOrEmpty(path);
  ASSERT_GT(real.size(), 1000u);
  struct Case {
    std::string what, content, needle;
  };
  const std::vector<Case> cases = {
      {"garbage", "this is not a checkpoint", "cannot read checkpoint '" + path + "'"},
      {"truncated", real.substr(0, real.size() / 2), "cannot read checkpoint '" + path + "'"},
      {"another run's", ReadFileOrEmpty(other.dir() + "/ckpt/worker-0.ckpt"), "checkpoint '" + path +
                                                                                     "' belongs to run"},
  };
  ASSERT_FALSE(mine.StartServers(1).empty());
  for (const Case& c : cases) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << c.content;
    const pid_t worker = mine.StartWorker(0, {"--checkpoint_dir=" + mine.dir() + "/ckpt", "--checkpoint_every=4"});
    EXPECT_EQ(mine.WaitForWorkerExit(worker, std::chrono::seconds(60)), 2) << c.what;
    const std::string err = ReadFileOrEmpty(mine.dir() + "/worker0.err");
    EXPECT_NE(err.find(c.needle), std::string::npos) << c.what << ": " << err;
    EXPECT_EQ(ReadFileOrEmpty(path), c.content) << c.what << ": the refused checkpoint was overwritten";
  }
  mine.StopServers(SIGTERM);
}

}  // namespace
}  // namespace sketchfuse
