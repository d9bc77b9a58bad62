#include "server/job_config.h"

#include <cstdlib>
#include <fstream>
#include <functional>
#include <vector>

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


// A job of two fused groups (layers of 60 + 40 and of 30 elements) cut by
// partition_elements 40 into partitions of 34, 33, 33 and 30 elements.
v1::JobConfig PartitionedJob() {
  v1::JobConfig job;
  job.set_job("p");
  job.set_world_size(2);
  v1::RunConfig* run = job.mutable_run();
  for (uint64_t size : {60, 40, 30}) run->add_layer_sizes(size);
  run->set_partition_elements(40);
  const struct { uint32_t begin, end; uint64_t offset, dim; } parts[] = {
      {0, 2, 0, 34}, {0, 2, 34, 33}, {0, 2, 67, 33}, {2, 3, 0, 30}};
  uint32_t g = 0;
  for (const auto& part : parts) {
    v1::GroupConfig* group = job.add_groups();
    group->set_group(g++);
    group->set_layer_begin(part.begin);
    group->set_layer_end(part.end);
    group->set_offset(part.offset);
    group->set_dim(part.dim);
    group->set_compressor("dense");
  }
  return job;
}

TEST(JobConfigTest, PartitionsAreAcceptedAndSpreadOverShards) {
  const v1::JobConfig job = PartitionedJob();
  ASSERT_TRUE(ValidateGroupLayers(job).ok()) << ValidateGroupLayers(job);
  // LPT: 34 -> 0, 33 -> 1, 33 -> 1 (33 < 34), 30 -> 0.
  EXPECT_EQ(*ShardOfGroups(job, 2), (std::vector<int>{0, 1, 1, 0}));
  AggregationConfig s0 = *ShardConfig(job, 0, 2);
  ASSERT_EQ(s0.groups.size(), 2u);
  EXPECT_EQ(s0.groups[0].dim, 34u);
}

// Partitions that do not tile their fused group, or that another bound
// would make, are refused naming the partition.
TEST(JobConfigTest, PartitionsThatAreNotTheBoundsAreRefusedByName) {
  struct Case {
    std::function<void(v1::JobConfig&)> change;
    const char* says;
  };
  const std::vector<Case> cases = {
      {[](v1::JobConfig& j) { j.mutable_groups(1)->set_offset(35); }, "group 1 is a partition at offset 35"},
      {[](v1::JobConfig& j) { j.mutable_groups(2)->set_dim(32); }, "cover 99 of their 100 elements"},
      {[](v1::JobConfig& j) { j.mutable_groups(3)->set_offset(5); }, "group 3 is a partition at offset 5"},
      {[](v1::JobConfig& j) { j.mutable_run()->set_partition_elements(50); },
       "group 0 (offset 0, 34 elements) is not a partition that partition_elements 50 makes"},
      {[](v1::JobConfig& j) { j.mutable_run()->set_partition_elements(0); }, "partition_elements 0 makes"},
      {[](v1::JobConfig& j) { j.mutable_groups(0)->set_dim(101); }, "group 0 has dim 101 but its layers hold 100"},
  };
  for (const Case& c : cases) {
    v1::JobConfig job = PartitionedJob();
    c.change(job);
    const absl::Status s = ValidateGroupLayers(job);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.says;
    EXPECT_NE(s.message().find(c.says), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace sketchfuse
