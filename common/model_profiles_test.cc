// Tests for model_profiles: checks each generated profile against the
// project's reference table and the structural contracts of the API.

#include "common/model_profiles.h"

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

// One row of the reference table.
struct Expected {
  std::string name;
  int64_t tensors;
  int64_t parameters;
  int64_t largest;
  int64_t median;
  int64_t smaller_than_10k;
};

class ModelProfileTest : public ::testing::TestWithParam<Expected> {
 protected:
  ModelProfile Profile() const {
    absl::StatusOr<ModelProfile> p = ModelProfileByName(GetParam().name);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *p : ModelProfile{};
  }
};

TEST_P(ModelProfileTest, MatchesReferenceTable) {
  const Expected& e = GetParam();
  const ModelProfile p = Profile();
  EXPECT_EQ(p.name, e.name);
  EXPECT_EQ(static_cast<int64_t>(p.tensors.size()), e.tensors);
  EXPECT_EQ(p.TotalElements(), e.parameters);
  EXPECT_EQ(p.LargestTensor(), e.largest);
  EXPECT_EQ(p.MedianTensor(), e.median);
  EXPECT_EQ(p.CountSmallerThan(10000), e.smaller_than_10k);
}

TEST_P(ModelProfileTest, BackwardOrderIsReverseOfForward) {
  const ModelProfile p = Profile();
  const std::vector<TensorSpec> backward = p.BackwardOrder();
  ASSERT_EQ(backward.size(), p.tensors.size());
  for (size_t i = 0; i < backward.size(); ++i) {
    const TensorSpec& fwd = p.tensors[p.tensors.size() - 1 - i];
    EXPECT_EQ(backward[i].name, fwd.name);
    EXPECT_EQ(backward[i].num_elements, fwd.num_elements);
  }
}

TEST_P(ModelProfileTest, NamesUniqueNonEmptyAndSizesPositive) {
  const ModelProfile p = Profile();
  std::set<std::string> seen;
  for (const TensorSpec& t : p.tensors) {
    EXPECT_FALSE(t.name.empty());
    EXPECT_GT(t.num_elements, 0) << t.name;
    EXPECT_TRUE(seen.insert(t.name).second) << "duplicate: " << t.name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    ReferenceTable, ModelProfileTest,
    ::testing::Values(
        Expected{"resnet50", 161, 25557032, 2359296, 512, 109},
        Expected{"vgg16", 32, 138357544, 102760448, 4096, 17},
        Expected{"bert_base", 199, 109482240, 23440896, 768, 124},
        Expected{"gpt2_small", 148, 124439808, 38597376, 2304, 98}),
    [](const ::testing::TestParamInfo<Expected>& info) {
      return info.param.name;
    });

TEST(ModelProfileByNameTest, AcceptsEveryListedName) {
  const std::vector<std::string> names = ModelProfileNames();
  ASSERT_EQ(names.size(), 4u);
  for (const std::string& name : names) {
    absl::StatusOr<ModelProfile> p = ModelProfileByName(name);
    ASSERT_TRUE(p.ok()) << name << ": " << p.status();
    EXPECT_EQ(p->name, name);
  }
}

TEST(ModelProfileByNameTest, RejectsUnknownName) {
  absl::StatusOr<ModelProfile> p = ModelProfileByName("resnet51");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("resnet51"), absl::string_view::npos);
  EXPECT_NE(p.status().message().find("gpt2_small"), absl::string_view::npos);
}

}  // namespace
}  // namespace sketchfuse
