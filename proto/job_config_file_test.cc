#include "proto/job_config_file.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

v1::JobConfig SomeJob() {
  v1::JobConfig job;
  job.set_job("j");
  job.set_world_size(4);
  job.set_round_deadline_ms(1234);
  v1::GroupConfig* g = job.add_groups();
  g->set_group(0);
  g->set_dim(1000);
  g->set_compressor("count_sketch:method=peel,density=0.00625,rows=4,width=4");
  g->set_layer_end(2);
  job.mutable_run()->add_layer_sizes(600);
  job.mutable_run()->add_layer_sizes(400);
  job.mutable_run()->set_partition_elements(0);
  return job;
}

TEST(JobConfigFileTest, WhatIsWrittenIsReadBack) {
  const std::string path = TempPath("job.json");
  ASSERT_TRUE(WriteJobConfig(SomeJob(), path).ok());
  absl::StatusOr<v1::JobConfig> read = ReadJobConfig(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->SerializeAsString(), SomeJob().SerializeAsString());
  std::ifstream in(path);
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, "{");  // JSON
  EXPECT_FALSE(std::ifstream(path + ".tmp").good()) << "the temporary file was renamed into place";
}

// A run without partition_elements (a file from before partitions, or
// written by hand) reads as one that cuts no group; a bound survives.
TEST(JobConfigFileTest, PartitionBoundIsAlwaysStated) {
  const std::string path = TempPath("partitions.json");
  v1::JobConfig job = SomeJob();
  job.mutable_run()->clear_partition_elements();
  ASSERT_TRUE(WriteJobConfig(job, path).ok());
  absl::StatusOr<v1::JobConfig> read = ReadJobConfig(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->run().has_partition_elements());
  EXPECT_EQ(read->run().partition_elements(), 0u);
  job.mutable_run()->set_partition_elements(300);
  job.mutable_groups(0)->set_offset(7);
  ASSERT_TRUE(WriteJobConfig(job, path).ok());
  read = ReadJobConfig(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->run().partition_elements(), 300u);
  EXPECT_EQ(read->groups(0).offset(), 7u);
}

TEST(JobConfigFileTest, TextFormatIsReadByExtension) {
  const std::string path = TempPath("job.txtpb");
  std::ofstream(path) << "job: \"t\" world_size: 2 groups { group: 0 dim: 10 compressor: \"dense\" }";
  absl::StatusOr<v1::JobConfig> read = ReadJobConfig(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->job(), "t");
  EXPECT_EQ(read->groups(0).dim(), 10u);
}

TEST(JobConfigFileTest, BadFilesAreRefusedNamingThem) {
  EXPECT_EQ(ReadJobConfig(TempPath("missing.json")).status().code(), absl::StatusCode::kNotFound);
  const std::string broken = TempPath("broken.json");
  std::ofstream(broken) << "{\"job\": ";
  absl::Status status = ReadJobConfig(broken).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("broken.json' is not valid JSON for JobConfig"), std::string::npos) << status;
  const std::string text = TempPath("broken.txt");
  std::ofstream(text) << "job: 3 4 {";
  EXPECT_EQ(ReadJobConfig(text).status().code(), absl::StatusCode::kInvalidArgument);
  status = WriteJobConfig(SomeJob(), TempPath("no/such/dir/job.json"));
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(status.message().find("no/such/dir/job.json.tmp"), std::string::npos) << status;
}

}  // namespace
}  // namespace sketchfuse
