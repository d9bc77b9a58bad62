// A short load run against a real sketchfuse_server process (tests/load_run.h):
// 4 workers × 3 groups × 150 steps pushed concurrently; every push succeeds
// and every answer equals the update computed in process. (Throughput,
// latency and memory are reported by //tests:load_client, not checked here.)
// Usage (from Bazel): load_test <sketchfuse_server>
#include "gtest/gtest.h"
#include "tests/load_run.h"
#include "tests/process_util.h"

namespace sketchfuse {
namespace {

std::string server_binary;

TEST(LoadTest, ManyWorkersAndGroupsAtOnceAllAnsweredRight) {
  LoadConfig config;
  config.server_binary = server_binary;
  config.dir = TestTempDir();
  config.workers = 4;
  config.groups = 3;
  config.dim = 20000;
  config.steps = 150;
  absl::StatusOr<LoadReport> report = RunLoad(config);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->failed_pushes, 0u);
  EXPECT_EQ(report->wrong_updates, 0u);
  EXPECT_EQ(report->rounds, 450u);
  EXPECT_FALSE(report->rss_kib.empty());
  EXPECT_GT(report->rss_kib.back().second, 0u);
}

TEST(LoadTest, RefusesAConfigOutOfRange) {
  LoadConfig config;
  config.server_binary = server_binary;
  config.dir = TestTempDir();
  config.workers = 0;
  EXPECT_EQ(RunLoad(config).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sketchfuse

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <sketchfuse_server>\n", argv[0]);
    return 2;
  }
  sketchfuse::server_binary = argv[1];
  return RUN_ALL_TESTS();
}
