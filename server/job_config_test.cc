#include "server/job_config.h"

#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

std::string WriteTemp(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(JobConfigTest, ReadsJsonAndTextAndSplitsGroupsOverShards) {
  const std::string json = WriteTemp("job.json", R"({"job": "j", "worldSize": 4,
      "groups": [{"group": 0, "dim": 1000, "compressor": "dense"},
                 {"group": 1, "dim": 900, "compressor": "topk:k=5"},
                 {"group": 2, "dim": 100, "compressor": "dense"}],
      "roundDeadlineMs": 1500})");
  absl::StatusOr<v1::JobConfig> config = ReadJobConfig(json);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->groups_size(), 3);
  const std::string text = WriteTemp("job.txtpb",
      "job: 'j' world_size: 4 groups { group: 0 dim: 1000 compressor: 'dense' }");
  ASSERT_TRUE(ReadJobConfig(text).ok());

  // LPT over 2 shards: 1000 -> shard 0, 900 -> shard 1, 100 -> shard 1.
  AggregationConfig s0 = *ShardConfig(*config, 0, 2), s1 = *ShardConfig(*config, 1, 2);
  ASSERT_EQ(s0.groups.size(), 1u);
  EXPECT_EQ(s0.groups[0].group, 0u);
  ASSERT_EQ(s1.groups.size(), 2u);
  EXPECT_EQ(s1.round_deadline, absl::Milliseconds(1500));
}

TEST(JobConfigTest, BadFilesAndConfigsAreRefusedByName) {
  EXPECT_EQ(ReadJobConfig("/nonexistent/job.json").status().code(), absl::StatusCode::kNotFound);
  absl::Status s = ReadJobConfig(WriteTemp("bad.json", "{\"job\": 3,")).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("bad.json"), std::string::npos) << s;
  s = ReadJobConfig(WriteTemp("unknown.json", "{\"jobb\": \"x\"}")).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_FALSE(ReadJobConfig(WriteTemp("bad.txtpb", "job: ")).ok());

  v1::JobConfig config = *ReadJobConfig(WriteTemp("ok.json",
      R"({"job": "j", "worldSize": 2, "groups": [{"group": 0, "dim": 10, "compressor": "sketchy"}]})"));
  s = ShardConfig(config, 0, 1).status();
  EXPECT_NE(s.message().find("unknown compressor 'sketchy'"), std::string::npos) << s;
  EXPECT_EQ(ShardConfig(config, 1, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ShardConfig(config, 0, 0).status().code(), absl::StatusCode::kInvalidArgument);

  config.mutable_groups(0)->set_dim(uint64_t{1} << 63);
  s = ShardOfGroups(config, 2).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "group 0 has dim 9223372036854775808, past 2^63 - 1");
}

}  // namespace
}  // namespace sketchfuse
