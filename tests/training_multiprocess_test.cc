// Real training on a local cluster of real processes on loopback: two
// sketchfuse_server shards (one serving the coordinator) and sketchfuse_worker
// processes training the Fashion-MNIST MLP.
//
//  - sketch_ps reaches a test accuracy within 1.5 points of dense aggregation
//    (dense_ps) with the same seed and the same number of steps; every worker
//    of a run ends with the same model.
//  - Injected transport faults (failed attempts, lost replies, delays) are
//    retried and change nothing: the run ends with exactly the same model.
//  - A worker killed with SIGKILL mid-training and restarted resumes from its
//    checkpoint, and the run ends exactly where an uninterrupted run ends:
//    the MLP with SGD, and the transformer with AdamW (its moments in the
//    checkpoint: the optimizer's, or each group's on the worker).
// Usage (from Bazel): training_multiprocess_test <sketchfuse_server> <sketchfuse_worker>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
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

// Flags every process of the run shares.
std::vector<std::string> RunFlags(const std::string& scheme, int world) {
  return {"--job=train", absl::StrCat("--world_size=", world), "--workload=mlp", "--scheme=" + scheme,
          "--train_examples=24000", "--test_examples=10000", "--epochs=2", "--batch_size=32", "--seed=5",
          "--report_every=0"};
}

TrainingCluster Cluster(const std::string& name, const std::string& scheme, int world) {
  return TrainingCluster(daemon_binaries.server, daemon_binaries.worker, absl::StrCat(TestTempDir(), "/", name),
                         RunFlags(scheme, world));
}

TEST(TrainingTest, SketchPsReachesDenseAccuracyWithinOnePointFive) {
  const std::vector<WorkerResult> dense = Cluster("dense_ps", "dense_ps", 4).Train(4, 2);
  const std::vector<WorkerResult> sketch = Cluster("sketch_ps", "sketch_ps", 4).Train(4, 2);
  ASSERT_EQ(dense.size(), 4u);
  ASSERT_EQ(sketch.size(), 4u);
  for (int w = 1; w < 4; ++w) {
    // Every worker applied the same updates: the same model, the same accuracy.
    EXPECT_EQ(dense[w].last_epoch, dense[0].last_epoch);
    EXPECT_EQ(sketch[w].last_epoch, sketch[0].last_epoch);
  }
  std::printf("final test accuracy: dense_ps %.4f, sketch_ps %.4f\n", dense[0].accuracy, sketch[0].accuracy);
  EXPECT_GT(dense[0].accuracy, 0.80);
  EXPECT_GE(sketch[0].accuracy, dense[0].accuracy - 0.015);

  // The same sketch_ps run while each worker's transport fails 5% of its
  // push attempts before sending, loses 5% of the replies after the server
  // handled the push, and delays 5% by 20 ms: every failure is retried, the
  // servers never add a re-push twice and answer it with the kept update, so
  // the run ends with exactly the same model.
  TrainingCluster faulty = Cluster("sketch_ps_faults", "sketch_ps", 4);
  const std::vector<WorkerResult> retried =
      faulty.Train(4, 2, {"--inject_faults=fail_before_send=0.05,drop_reply=0.05,delay=0.05:20ms,seed=3"});
  ASSERT_EQ(retried.size(), 4u);
  for (int w = 0; w < 4; ++w) {
    EXPECT_EQ(retried[w].last_epoch, sketch[0].last_epoch) << "worker " << w;
    EXPECT_EQ(retried[w].steps, sketch[w].steps) << "worker " << w;
    const std::string out = faulty.WorkerOut(w);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(out, m, std::regex("injected ([0-9]+) transport faults; ([0-9]+) push attempts")))
        << "worker " << w << " reported no injected faults";
    EXPECT_GT(std::stoi(m[1]), 0) << "worker " << w;
    EXPECT_GT(std::stoi(m[2]), 0) << "worker " << w;
  }
}

// Kills worker-1 of `name`'s run once it has checkpointed, restarts it, and
// expects the run to end exactly as the same run uninterrupted.
void ExpectAKilledWorkerToResumeExactly(const std::string& name, const std::vector<std::string>& run_flags) {
  const std::vector<std::string> reference_flags = {"--checkpoint_dir=" + TestTempDir() + "/" + name +
                                                        "_reference/ckpt",
                                                    "--checkpoint_every=4"};
  TrainingCluster uninterrupted(daemon_binaries.server, daemon_binaries.worker,
                                absl::StrCat(TestTempDir(), "/", name, "_reference"), run_flags);
  std::filesystem::create_directories(uninterrupted.dir() + "/ckpt");
  const std::vector<WorkerResult> reference_run = uninterrupted.Train(2, 1, reference_flags);
  ASSERT_EQ(reference_run.size(), 2u);
  const WorkerResult reference = reference_run[0];

  TrainingCluster cluster(daemon_binaries.server, daemon_binaries.worker,
                          absl::StrCat(TestTempDir(), "/", name, "_interrupted"), run_flags);
  std::filesystem::create_directories(cluster.dir() + "/ckpt");
  ASSERT_FALSE(cluster.StartServers(1).empty());
  const std::vector<std::string> flags = {"--checkpoint_dir=" + cluster.dir() + "/ckpt", "--checkpoint_every=4"};
  cluster.StartWorker(0, flags);
  const pid_t second = cluster.StartWorker(1, flags);
  // Kill worker-1 once it has written a checkpoint, well before the end.
  const std::string checkpoint = cluster.dir() + "/ckpt/worker-1.ckpt";
  for (int i = 0; i < 600 && ReadFileOrEmpty(checkpoint).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(ReadFileOrEmpty(checkpoint).empty()) << "worker-1 wrote no checkpoint";
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  EXPECT_EQ(cluster.KillWorker(second), 128 + SIGKILL);
  std::rename((cluster.dir() + "/worker1.out").c_str(), (cluster.dir() + "/worker1.killed.out").c_str());
  cluster.StartWorker(1, flags);  // the same id: it gets rank 1 back and resumes
  const std::vector<WorkerResult> results = cluster.WaitForWorkers();
  cluster.StopServers(SIGTERM);
  ASSERT_EQ(results.size(), 2u);
  const WorkerResult survivor = results[0], resumed = results[1];
  EXPECT_GT(resumed.resumed_from, 0) << "the restarted worker did not resume from its checkpoint";
  EXPECT_EQ(survivor.resumed_from, 0);
  EXPECT_FALSE(reference.last_epoch.empty());
  // Exactly the uninterrupted run's final model: same test loss and accuracy.
  EXPECT_EQ(survivor.last_epoch, reference.last_epoch);
  EXPECT_EQ(resumed.last_epoch, reference.last_epoch);
}

TEST(TrainingTest, AKilledWorkerResumesFromItsCheckpointAndTheRunEndsAsIfUninterrupted) {
  ExpectAKilledWorkerToResumeExactly("mlp_sgd", RunFlags("sketch_ps", 2));
}

// The same with AdamW's moments and step count in the optimizer's
// checkpoint (Adam on the aggregated update, --momentum_at=update), under a
// cosine schedule, on the transformer.
TEST(TrainingTest, AKilledAdamWWorkerResumesItsOptimizersStateExactly) {
  ExpectAKilledWorkerToResumeExactly(
      "char_lm_adamw",
      {"--job=train", "--world_size=2", "--workload=char_lm", "--scheme=sketch_ps", "--train_examples=1600",
       "--test_examples=200", "--epochs=1", "--batch_size=8", "--seed=5", "--report_every=0",
       "--optimizer=adamw:beta2=0.95,weight_decay=0.1", "--momentum_at=update", "--learning_rate=3e-3",
       "--lr_schedule=cosine", "--lr_warmup_steps=10"});
}

// The same with Adam's moments on the worker (the default): each group's
// moments and their step count are in the worker's checkpoint.
TEST(TrainingTest, AKilledWorkerResumesAdamsMomentsKeptOnTheWorkerExactly) {
  ExpectAKilledWorkerToResumeExactly(
      "char_lm_adamw_at_worker",
      {"--job=train", "--world_size=2", "--workload=char_lm", "--scheme=sketch_ps", "--train_examples=1600",
       "--test_examples=200", "--epochs=1", "--batch_size=8", "--seed=5", "--report_every=0",
       "--optimizer=adamw:beta2=0.95,weight_decay=0.1", "--learning_rate=3e-3", "--lr_schedule=cosine",
       "--lr_warmup_steps=10"});
}

}  // namespace
}  // namespace sketchfuse
