// Real training on a local cluster of real processes on loopback: two
// sketchfuse_server shards (one serving the coordinator) and sketchfuse_worker
// processes training the Fashion-MNIST MLP.
//
//  - sketch_ps reaches a test accuracy within 1.5 points of dense aggregation
//    (dense_ps) with the same seed and the same number of steps; every worker
//    of a run ends with the same model.
//  - A worker killed with SIGKILL mid-training and restarted resumes from its
//    checkpoint, and the run ends exactly where an uninterrupted run ends.
// Usage (from Bazel): training_multiprocess_test <sketchfuse_server> <sketchfuse_worker>
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

namespace sketchfuse {
namespace {

std::string server_binary;
std::string worker_binary;

struct WorkerResult {
  double accuracy = -1;
  std::string last_epoch;  // the summary's last epoch record (loss and accuracy)
  long resumed_from = -1;
};

WorkerResult ParseSummary(const std::string& out) {
  WorkerResult result;
  std::smatch m;
  if (std::regex_search(out, m, std::regex("\"final_test_accuracy\": ([0-9.]+)"))) result.accuracy = std::stod(m[1]);
  if (std::regex_search(out, m, std::regex("\"resumed_from_step\": ([0-9]+)"))) result.resumed_from = std::stol(m[1]);
  const size_t last = out.rfind("{\"epoch\"");
  if (last != std::string::npos) result.last_epoch = out.substr(last, out.find('}', last) - last);
  // Keep the test loss and accuracy: wall time differs between runs, and the
  // training loss is a mean over the steps a process ran (fewer after a resume).
  result.last_epoch = std::regex_replace(result.last_epoch, std::regex(", \"elapsed_s\": [0-9.]+"), "");
  result.last_epoch = std::regex_replace(result.last_epoch, std::regex(", \"train_loss\": [0-9.]+"), "");
  return result;
}

class TrainingTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (pid_t pid : pids_) KillIfRunning(pid);
  }

  // Flags every process of the run shares.
  std::vector<std::string> RunFlags(const std::string& scheme, int world) const {
    return {"--job=train", absl::StrCat("--world_size=", world), "--workload=mlp", "--scheme=" + scheme,
            "--train_examples=24000", "--test_examples=10000", "--epochs=2", "--batch_size=32", "--seed=5",
            "--report_every=0"};
  }

  // Writes the job config and starts `shards` servers; returns the coordinator's address.
  std::string StartServers(const std::string& dir, const std::string& scheme, int world, int shards) {
    std::vector<std::string> plan = {worker_binary, "--write_job_config=" + dir + "/job.json"};
    for (const std::string& f : RunFlags(scheme, world)) plan.push_back(f);
    const pid_t planner = Spawn(plan, dir + "/plan.out", dir + "/plan.err");
    EXPECT_EQ(WaitFor(planner, std::chrono::seconds(60)), 0) << ReadFileOrEmpty(dir + "/plan.err");
    std::ofstream(dir + "/token") << "train-token\n";
    std::string coordinator;
    for (int s = 0; s < shards; ++s) {
      std::vector<std::string> argv = {server_binary, "--job_config=" + dir + "/job.json",
                                       absl::StrCat("--shard_index=", s), absl::StrCat("--num_shards=", shards),
                                       "--port_file=" + absl::StrCat(dir, "/port", s), "--token_file=" + dir + "/token"};
      if (s == 0) {
        argv.push_back("--coordinator");
      } else {
        argv.push_back("--coordinator_address=" + coordinator);
      }
      pids_.push_back(Spawn(argv, absl::StrCat(dir, "/server", s, ".out"), absl::StrCat(dir, "/server", s, ".err")));
      const std::string port = WaitForFile(absl::StrCat(dir, "/port", s), std::chrono::seconds(30));
      EXPECT_FALSE(port.empty()) << ReadFileOrEmpty(absl::StrCat(dir, "/server", s, ".err"));
      if (s == 0) coordinator = "127.0.0.1:" + std::string(port.substr(0, port.find('\n')));
    }
    return coordinator;
  }

  pid_t StartWorker(const std::string& dir, const std::string& coordinator, const std::string& scheme, int world,
                    int w, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {worker_binary, "--coordinator=" + coordinator,
                                     absl::StrCat("--worker_id=worker-", w), "--token_file=" + dir + "/token"};
    for (const std::string& f : RunFlags(scheme, world)) argv.push_back(f);
    for (const std::string& f : extra) argv.push_back(f);
    return Spawn(argv, absl::StrCat(dir, "/worker", w, ".out"), absl::StrCat(dir, "/worker", w, ".err"));
  }

  void StopServers() {
    for (pid_t pid : pids_) kill(pid, SIGTERM);
    for (pid_t pid : pids_) EXPECT_EQ(WaitFor(pid, std::chrono::seconds(30)), 0);
    pids_.clear();
  }

  // Runs a whole job; returns each worker's result.
  std::vector<WorkerResult> Train(const std::string& scheme, int world, int shards) {
    const std::string dir = absl::StrCat(TestTempDir(), "/", scheme);
    std::filesystem::create_directories(dir);
    const std::string coordinator = StartServers(dir, scheme, world, shards);
    std::vector<pid_t> workers;
    for (int w = 0; w < world; ++w) workers.push_back(StartWorker(dir, coordinator, scheme, world, w));
    std::vector<WorkerResult> results;
    for (int w = 0; w < world; ++w) {
      EXPECT_EQ(WaitFor(workers[w], std::chrono::seconds(600)), 0)
          << ReadFileOrEmpty(absl::StrCat(dir, "/worker", w, ".err"));
      results.push_back(ParseSummary(ReadFileOrEmpty(absl::StrCat(dir, "/worker", w, ".out"))));
    }
    StopServers();
    return results;
  }

  std::vector<pid_t> pids_;
};

TEST_F(TrainingTest, SketchPsReachesDenseAccuracyWithinOnePointFive) {
  const std::vector<WorkerResult> dense = Train("dense_ps", 4, 2);
  const std::vector<WorkerResult> sketch = Train("sketch_ps", 4, 2);
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
}

TEST_F(TrainingTest, AKilledWorkerResumesFromItsCheckpointAndTheRunEndsAsIfUninterrupted) {
  const std::vector<std::string> checkpoints = {"--checkpoint_every=4"};
  // The uninterrupted reference.
  const std::string ref_dir = TestTempDir() + "/reference";
  std::filesystem::create_directories(ref_dir + "/ckpt");
  std::string coordinator = StartServers(ref_dir, "sketch_ps", 2, 1);
  std::vector<pid_t> workers;
  for (int w = 0; w < 2; ++w) {
    workers.push_back(StartWorker(ref_dir, coordinator, "sketch_ps", 2, w,
                                  {"--checkpoint_dir=" + ref_dir + "/ckpt", "--checkpoint_every=4"}));
  }
  for (pid_t pid : workers) ASSERT_EQ(WaitFor(pid, std::chrono::seconds(600)), 0);
  const WorkerResult reference = ParseSummary(ReadFileOrEmpty(ref_dir + "/worker0.out"));
  StopServers();

  const std::string dir = TestTempDir() + "/interrupted";
  std::filesystem::create_directories(dir + "/ckpt");
  coordinator = StartServers(dir, "sketch_ps", 2, 1);
  const std::vector<std::string> flags = {"--checkpoint_dir=" + dir + "/ckpt", "--checkpoint_every=4"};
  const pid_t first = StartWorker(dir, coordinator, "sketch_ps", 2, 0, flags);
  pid_t second = StartWorker(dir, coordinator, "sketch_ps", 2, 1, flags);
  // Kill worker-1 once it has written a checkpoint, well before the end.
  const std::string checkpoint = dir + "/ckpt/worker-1.ckpt";
  for (int i = 0; i < 600 && ReadFileOrEmpty(checkpoint).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(ReadFileOrEmpty(checkpoint).empty()) << "worker-1 wrote no checkpoint";
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  ASSERT_EQ(kill(second, SIGKILL), 0);
  EXPECT_EQ(WaitFor(second, std::chrono::seconds(10)), 128 + SIGKILL);
  std::rename((dir + "/worker1.out").c_str(), (dir + "/worker1.killed.out").c_str());
  second = StartWorker(dir, coordinator, "sketch_ps", 2, 1, flags);
  ASSERT_EQ(WaitFor(second, std::chrono::seconds(600)), 0) << ReadFileOrEmpty(dir + "/worker1.err");
  ASSERT_EQ(WaitFor(first, std::chrono::seconds(600)), 0) << ReadFileOrEmpty(dir + "/worker0.err");
  StopServers();

  const WorkerResult resumed = ParseSummary(ReadFileOrEmpty(dir + "/worker1.out"));
  const WorkerResult survivor = ParseSummary(ReadFileOrEmpty(dir + "/worker0.out"));
  EXPECT_GT(resumed.resumed_from, 0) << "the restarted worker did not resume from its checkpoint";
  EXPECT_EQ(survivor.resumed_from, 0);
  EXPECT_FALSE(reference.last_epoch.empty());
  // Exactly the uninterrupted run's final model: same test loss and accuracy.
  EXPECT_EQ(survivor.last_epoch, reference.last_epoch);
  EXPECT_EQ(resumed.last_epoch, reference.last_epoch);
}

}  // namespace
}  // namespace sketchfuse

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <sketchfuse_server> <sketchfuse_worker>\n", argv[0]);
    return 2;
  }
  sketchfuse::server_binary = argv[1];
  sketchfuse::worker_binary = argv[2];
  return RUN_ALL_TESTS();
}
