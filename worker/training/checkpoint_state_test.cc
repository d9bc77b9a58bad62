#include "worker/training/checkpoint_state.h"

#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

std::vector<GroupState> States() {
  return {GroupState{{1, 2, 3}, {4, 5, 6}, {}}, GroupState{{}, {}, {7, 8, 9, 10}}, GroupState{{11}, {}, {}}};
}

torch::serialize::InputArchive Reopen(torch::serialize::OutputArchive& out) {
  std::ostringstream bytes;
  out.save_to(bytes);
  std::istringstream in(bytes.str());
  torch::serialize::InputArchive archive;
  archive.load_from(in);
  return archive;
}

TEST(CheckpointStateTest, EveryPartKeepsItsName) {
  torch::serialize::OutputArchive out;
  WriteGroupStates(States(), out);
  torch::serialize::InputArchive in = Reopen(out);
  absl::StatusOr<std::vector<GroupState>> read = ReadGroupStates(in, States());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, States());
  torch::Tensor t;
  EXPECT_TRUE(in.try_read("group_1_method_state", t));
  EXPECT_EQ(t.numel(), 4);
}

// A checkpoint written before the parts had names: two numbered entries per
// group, the residual then the velocity, or FetchSGD's error then momentum.
TEST(CheckpointStateTest, FormatOneIsStillRead) {
  const std::vector<std::vector<float>> old = {{1, 2, 3}, {4, 5, 6}, {9, 10}, {7, 8}, {11}, {}};
  torch::serialize::OutputArchive out;
  out.write("groups", torch::tensor({static_cast<int64_t>(old.size())}, torch::kInt64));
  for (size_t i = 0; i < old.size(); ++i) {
    out.write(absl::StrCat("residual_", i),
              torch::from_blob(const_cast<float*>(old[i].data()), {static_cast<int64_t>(old[i].size())}).clone());
  }
  torch::serialize::InputArchive in = Reopen(out);
  absl::StatusOr<std::vector<GroupState>> read = ReadGroupStates(in, States());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, States());
}

TEST(CheckpointStateTest, AnotherNumberOfGroupsOrAnUnknownFormatIsRefusedByName) {
  torch::serialize::OutputArchive out;
  WriteGroupStates(States(), out);
  torch::serialize::InputArchive in = Reopen(out);
  std::vector<GroupState> fewer = States();
  fewer.pop_back();
  absl::StatusOr<std::vector<GroupState>> read = ReadGroupStates(in, fewer);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(read.status().message().find("holds the state of 3 groups; this run has 2"), std::string::npos)
      << read.status();

  torch::serialize::OutputArchive future;
  future.write("state_format", torch::tensor({int64_t{9}}, torch::kInt64));
  future.write("groups", torch::tensor({int64_t{3}}, torch::kInt64));
  torch::serialize::InputArchive later = Reopen(future);
  read = ReadGroupStates(later, States());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(read.status().message().find("format 9"), std::string::npos) << read.status();
}

}  // namespace
}  // namespace sketchfuse
