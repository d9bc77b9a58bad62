// Partitions on real shards: the main job's MLP is one fused group; cut into
// partitions for two shards (worker/pipeline/job_plan.h), both shards merge
// and decode, each about half of the bytes, and the run ends with exactly the
// model of the same run on one shard with the same partitions (a partition's
// arithmetic does not depend on where it is served), FetchSGD's sketches and
// the exact second round included. A worker that states other partitions is
// refused by name. Real processes on loopback.
// Usage (from Bazel): shard_partitions_test <sketchfuse_server> <sketchfuse_worker>
#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/process_util.h"
#include "tests/training_cluster.h"

namespace sketchfuse {
namespace {

constexpr int kWorkers = 2;

// The MLP's 235,146 elements on two shards: ceil(235146 / 4), four partitions.
constexpr int kTwoShardBound = 58787;

std::vector<std::string> RunFlags(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> flags = {"--job=partitions", absl::StrCat("--world_size=", kWorkers), "--workload=mlp",
                                    "--scheme=sketch_ps", "--fusion=single", "--train_examples=8000",
                                    "--test_examples=2000", "--epochs=1", "--batch_size=32", "--seed=11",
                                    "--report_every=0"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  return flags;
}

struct ShardLoad {
  long pushes = -1;
  double bytes_in = 0, bytes_out = 0, decode_seconds = 0;
  std::string groups;
};

// What a stopped shard's output says about its work.
ShardLoad LoadOf(const std::string& out) {
  ShardLoad load;
  std::smatch m;
  if (std::regex_search(out, m, std::regex("groups ([0-9,]*); listening"))) load.groups = m[1];
  if (std::regex_search(out, m, std::regex("; ([0-9]+) pushes, bytes in ([0-9]+), bytes out ([0-9]+), "
                                           "decode ([0-9.e+-]+) s"))) {
    load.pushes = std::stol(m[1]);
    load.bytes_in = std::stod(m[2]);
    load.bytes_out = std::stod(m[3]);
    load.decode_seconds = std::stod(m[4]);
  }
  return load;
}

TEST(ShardPartitionsTest, OneGroupOnTwoShardsUsesBothAndEndsAsOnOneShard) {
  TrainingCluster two(daemon_binaries.server, daemon_binaries.worker, TestTempDir() + "/two_shards", RunFlags());
  ASSERT_FALSE(two.StartServers(2).empty());
  const std::string job = ReadFileOrEmpty(two.dir() + "/job.json");
  EXPECT_NE(job.find(absl::StrCat("\"partitionElements\": \"", kTwoShardBound, "\"")), std::string::npos) << job;

  // A worker with other partitions is refused at join, naming the field.
  const pid_t rogue = two.StartWorker(0, {"--partition_elements=1000", "--worker_id=rogue"});
  EXPECT_NE(two.WaitForWorkerExit(rogue, std::chrono::seconds(60)), 0);
  const std::string refused = two.WorkerOut(0) + ReadFileOrEmpty(two.dir() + "/worker0.err");
  EXPECT_NE(refused.find(absl::StrCat("partition_elements: job has ", kTwoShardBound, ", worker has 1000")),
            std::string::npos)
      << refused;

  for (int w = 0; w < kWorkers; ++w) two.StartWorker(w);
  const std::vector<WorkerResult> on_two = two.WaitForWorkers();
  two.StopServers(SIGTERM);
  ASSERT_EQ(on_two.size(), static_cast<size_t>(kWorkers));
  EXPECT_GT(on_two[0].accuracy, 0.6) << "the run did not train: equality would prove little";
  EXPECT_EQ(on_two[0].last_epoch, on_two[1].last_epoch);

  // Both shards served two of the four partitions, about half the bytes each.
  const std::string out0 = ReadFileOrEmpty(two.dir() + "/server0.out"), out1 = ReadFileOrEmpty(two.dir() + "/server1.out");
  const ShardLoad s0 = LoadOf(out0), s1 = LoadOf(out1);
  ASSERT_GT(s0.pushes, 0) << out0;
  ASSERT_GT(s1.pushes, 0) << out1;
  EXPECT_EQ(s0.groups.size(), 3u) << s0.groups;  // two partitions, "a,b"
  EXPECT_EQ(s1.groups.size(), 3u) << s1.groups;
  EXPECT_LE(s0.bytes_in, 0.55 * (s0.bytes_in + s1.bytes_in));
  EXPECT_LE(s1.bytes_in, 0.55 * (s0.bytes_in + s1.bytes_in));
  std::printf("two shards: shard 0 (partitions %s) %ld pushes, %.0f bytes in, %.0f out, decode %.3f s; "
              "shard 1 (partitions %s) %ld pushes, %.0f bytes in, %.0f out, decode %.3f s\n",
              s0.groups.c_str(), s0.pushes, s0.bytes_in, s0.bytes_out, s0.decode_seconds, s1.groups.c_str(),
              s1.pushes, s1.bytes_in, s1.bytes_out, s1.decode_seconds);

  // The same partitions on one shard: the same model, to the digit.
  TrainingCluster one(daemon_binaries.server, daemon_binaries.worker, TestTempDir() + "/one_shard",
                      RunFlags({absl::StrCat("--partition_elements=", kTwoShardBound)}));
  const std::vector<WorkerResult> on_one = one.Train(kWorkers, 1);
  ASSERT_EQ(on_one.size(), static_cast<size_t>(kWorkers));
  EXPECT_EQ(on_one[0].last_epoch, on_two[0].last_epoch);
  EXPECT_EQ(on_one[0].accuracy, on_two[0].accuracy);
  std::printf("accuracy %.4f on two shards, %.4f on one with the same partitions\n", on_two[0].accuracy,
              on_one[0].accuracy);
}

// The method state that lives where the sum is (FetchSGD's sketches, on the
// shard) and the exact second round are kept per partition: each ends on two
// shards as on one with the same partitions.
TEST(ShardPartitionsTest, FetchSgdAndTheSecondRoundArePerPartition) {
  struct Case {
    std::string name;
    std::vector<std::string> flags;
  };
  const Case cases[] = {
      {"fetchsgd", {"--compressor=count_sketch:method=fetchsgd,density=0.00625,rows=5,width=10"}},
      {"second_round", {"--compressor=count_sketch:method=estimate,density=0.01,rows=3,width=10", "--second_round"}},
  };
  for (const Case& c : cases) {
    TrainingCluster two(daemon_binaries.server, daemon_binaries.worker, TestTempDir() + "/two_" + c.name,
                        RunFlags(c.flags));
    const std::vector<WorkerResult> on_two = two.Train(kWorkers, 2);
    std::vector<std::string> same = c.flags;
    same.push_back(absl::StrCat("--partition_elements=", kTwoShardBound));
    TrainingCluster one(daemon_binaries.server, daemon_binaries.worker, TestTempDir() + "/one_" + c.name,
                        RunFlags(same));
    const std::vector<WorkerResult> on_one = one.Train(kWorkers, 1);
    ASSERT_EQ(on_two.size(), static_cast<size_t>(kWorkers)) << c.name;
    ASSERT_EQ(on_one.size(), static_cast<size_t>(kWorkers)) << c.name;
    EXPECT_GT(on_two[0].accuracy, 0.5) << c.name << " did not train: equality would prove little";
    EXPECT_EQ(on_one[0].last_epoch, on_two[0].last_epoch) << c.name;
    std::printf("%s: accuracy %.4f on two shards (four partitions), %.4f on one with the same partitions\n",
                c.name.c_str(), on_two[0].accuracy, on_one[0].accuracy);
  }
}

}  // namespace
}  // namespace sketchfuse
