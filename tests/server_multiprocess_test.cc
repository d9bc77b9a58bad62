// Two real sketchfuse_server daemons and three push_client worker processes on
// loopback. Every worker receives, for every step and group, exactly the update
// computed in process from the same payloads; a client with a wrong token is
// refused; both daemons exit 0 on SIGTERM.
// Usage (from Bazel): server_multiprocess_test <sketchfuse_server> <push_client>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <tuple>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "server/job_config.h"
#include "tests/process_util.h"
#include "tests/push_workload.h"

namespace sketchfuse {
namespace {

std::string server_binary;
std::string client_binary;

class ServerMultiprocessTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (pid_t pid : servers_) KillIfRunning(pid);
  }
  std::vector<pid_t> servers_;
};

TEST_F(ServerMultiprocessTest, TwoShardsThreeWorkersEveryUpdateIsRight) {
  const std::string dir = TestTempDir();
  const std::string config_path = dir + "/job.json";
  std::ofstream(config_path) << R"({"job": "mp", "worldSize": 3, "roundDeadlineMs": 30000,
    "groups": [{"group": 0, "dim": 1000, "compressor": "dense"},
               {"group": 1, "dim": 60000, "compressor": "count_sketch:k=60,seed=9"},
               {"group": 2, "dim": 20000, "compressor": "topk:k=40", "reselectTopK": 40},
               {"group": 3, "dim": 300, "compressor": "randomk:k=30"}]})";
  std::ofstream(dir + "/token") << "mp-token\n";
  const v1::JobConfig job = *ReadJobConfig(config_path);

  std::vector<std::string> addresses;
  for (int shard = 0; shard < 2; ++shard) {
    const std::string port_file = absl::StrCat(dir, "/port", shard);
    const pid_t pid = Spawn({server_binary, "--job_config=" + config_path,
                             absl::StrCat("--shard_index=", shard), "--num_shards=2", "--port=0",
                             "--port_file=" + port_file, "--token_file=" + dir + "/token", "--metrics_port=0",
                             absl::StrCat("--metrics_port_file=", dir, "/metrics_port", shard)},
                            absl::StrCat(dir, "/server", shard, ".out"),
                            absl::StrCat(dir, "/server", shard, ".err"));
    ASSERT_GT(pid, 0);
    servers_.push_back(pid);
    const std::string port = WaitForFile(port_file, std::chrono::seconds(30));
    ASSERT_FALSE(port.empty()) << "shard " << shard << " did not start: "
                               << ReadFileOrEmpty(absl::StrCat(dir, "/server", shard, ".err"));
    addresses.push_back(absl::StrCat("127.0.0.1:", std::stoi(port)));
  }

  constexpr int kSteps = 3;
  std::vector<pid_t> clients;
  for (int w = 0; w < 3; ++w) {
    clients.push_back(Spawn({client_binary, "--servers=" + absl::StrJoin(addresses, ","),
                             "--job_config=" + config_path, absl::StrCat("--worker=", w),
                             absl::StrCat("--steps=", kSteps), "--token_file=" + dir + "/token"},
                            absl::StrCat(dir, "/client", w, ".out"),
                            absl::StrCat(dir, "/client", w, ".err")));
    ASSERT_GT(clients.back(), 0);
  }
  for (int w = 0; w < 3; ++w) {
    EXPECT_EQ(WaitFor(clients[w], std::chrono::seconds(120)), 0)
        << ReadFileOrEmpty(absl::StrCat(dir, "/client", w, ".err"));
  }

  // Every worker printed, for every step and group, the expected update: the
  // same entry count and index sum, and a value sum equal up to float
  // rounding (shards merge in arrival order, the check in worker order).
  for (int w = 0; w < 3; ++w) {
    std::ifstream out(absl::StrCat(dir, "/client", w, ".out"));
    std::map<std::pair<int, int>, std::tuple<long, double, double>> got;
    std::string line;
    while (std::getline(out, line)) {
      int step, group;
      long n;
      double idx, val;
      ASSERT_EQ(std::sscanf(line.c_str(), "step %d group %d n=%ld idx=%lf val=%lf", &step, &group,
                            &n, &idx, &val), 5) << line;
      got[{step, group}] = {n, idx, val};
    }
    for (int step = 0; step < kSteps; ++step) {
      for (const v1::GroupConfig& group : job.groups()) {
        absl::StatusOr<Update> expected = ExpectedUpdate(group, 3, step);
        ASSERT_TRUE(expected.ok()) << expected.status();
        double idx = 0, val = 0, mass = 0;
        for (uint32_t i : expected->indices) idx += i;
        for (float v : expected->values) val += v, mass += std::abs(v);
        auto it = got.find({step, static_cast<int>(group.group())});
        ASSERT_NE(it, got.end()) << "worker " << w << " has no step " << step << " group "
                                 << group.group();
        const auto& [n, got_idx, got_val] = it->second;
        EXPECT_EQ(n, static_cast<long>(expected->values.size()));
        EXPECT_EQ(got_idx, idx) << "step " << step << " group " << group.group();
        EXPECT_NEAR(got_val, val, 1e-5 * mass + 1e-6) << "step " << step << " group " << group.group();
      }
    }
  }

  // A worker with the wrong token is refused.
  std::ofstream(dir + "/wrong") << "not-the-token";
  const pid_t intruder = Spawn({client_binary, "--servers=" + absl::StrJoin(addresses, ","),
                                "--job_config=" + config_path, "--worker=0", "--steps=1",
                                "--token_file=" + dir + "/wrong"},
                               dir + "/intruder.out", dir + "/intruder.err");
  EXPECT_EQ(WaitFor(intruder, std::chrono::seconds(60)), 1);
  EXPECT_NE(ReadFileOrEmpty(dir + "/intruder.err").find("wrong bearer token"), std::string::npos)
      << ReadFileOrEmpty(dir + "/intruder.err");

  // Each shard's metrics count what it did: every round of its groups
  // completed, every worker's push answered, the intruder's refused.
  double completed = 0, ok_pushes = 0, refused = 0;
  for (int shard = 0; shard < 2; ++shard) {
    const int port = std::stoi(ReadFileOrEmpty(absl::StrCat(dir, "/metrics_port", shard)));
    const std::string scrape = HttpGet(port, "/metrics");
    ASSERT_NE(scrape.find("200 OK"), std::string::npos) << scrape;
    completed += MetricValue(scrape, "sketchfuse_server_rounds_total{result=\"completed\"}");
    ok_pushes += MetricValue(scrape, "sketchfuse_server_pushes_total{code=\"ok\"}");
    refused += std::max(0.0, MetricValue(scrape, "sketchfuse_server_pushes_total{code=\"unauthenticated\"}"));
    EXPECT_GT(MetricValue(scrape, "sketchfuse_server_bytes_in_total"), 0);
    EXPECT_GE(MetricValue(scrape, "sketchfuse_server_round_latency_seconds_count"), 1);
    EXPECT_EQ(MetricValue(scrape, "sketchfuse_server_rounds_open"), 0);
  }
  EXPECT_EQ(completed, kSteps * job.groups_size());
  EXPECT_EQ(ok_pushes, 3 * kSteps * job.groups_size());
  EXPECT_GE(refused, 1);

  // Clean shutdown.
  for (size_t s = 0; s < servers_.size(); ++s) {
    kill(servers_[s], SIGTERM);
    EXPECT_EQ(WaitFor(servers_[s], std::chrono::seconds(30)), 0);
    EXPECT_NE(ReadFileOrEmpty(absl::StrCat(dir, "/server", s, ".out")).find("stopped after"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace sketchfuse

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <sketchfuse_server> <push_client>\n", argv[0]);
    return 2;
  }
  sketchfuse::server_binary = argv[1];
  sketchfuse::client_binary = argv[2];
  return RUN_ALL_TESTS();
}
