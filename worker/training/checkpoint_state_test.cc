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

// Adam's moments on the worker keep their names; a format-2 checkpoint
// written before them (no moment parts) reads as no moments.
TEST(CheckpointStateTest, AdamMomentsKeepTheirNamesAndOlderCheckpointsHaveNone) {
  std::vector<GroupState> with_moments = States();
  with_moments[2].first_moment = {0.5f};
  with_moments[2].second_moment = {0.25f};
  with_moments[2].moment_steps = 7;
  torch::serialize::OutputArchive out;
  WriteGroupStates(with_moments, out);
  torch::serialize::InputArchive in = Reopen(out);
  absl::StatusOr<std::vector<GroupState>> read = ReadGroupStates(in, States());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, with_moments);

  torch::serialize::OutputArchive before;
  before.write("state_format", torch::tensor({int64_t{2}}, torch::kInt64));
  before.write("groups", torch::tensor({int64_t{1}}, torch::kInt64));
  for (const char* part : {"residual", "velocity", "method_state"}) {
    before.write(absl::StrCat("group_0_", part), torch::ones({2}));
  }
  torch::serialize::InputArchive old = Reopen(before);
  absl::StatusOr<std::vector<GroupState>> none = ReadGroupStates(old, {GroupState()});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE((*none)[0].first_moment.empty());
  EXPECT_EQ((*none)[0].moment_steps, 0u);
  EXPECT_EQ((*none)[0].residual, (std::vector<float>{1, 1}));

  // A step count that is not one non-negative count is refused by name.
  torch::serialize::OutputArchive bad;
  WriteGroupStates({GroupState()}, bad);
  bad.write("group_0_moment_steps", torch::tensor({int64_t{-3}}, torch::kInt64));
  torch::serialize::InputArchive bad_in = Reopen(bad);
  absl::StatusOr<std::vector<GroupState>> refused = ReadGroupStates(bad_in, {GroupState()});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("moment_steps is not one count"), std::string::npos);
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
