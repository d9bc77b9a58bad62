#include "worker/pipeline/fusion_layout.h"

#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

TEST(FusionLayoutTest, PlacesLayersOneAfterAnotherInTheirGroup) {
  absl::StatusOr<FusionLayout> layout = FusionLayout::Create({3, 5, 2, 4}, {{0, 1}, {1, 3}});
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->num_groups(), 2);
  EXPECT_EQ(layout->group_sizes(), (std::vector<int64_t>{3, 11}));
  EXPECT_EQ(layout->group_of_layer(0), 0);
  EXPECT_EQ(layout->group_of_layer(3), 1);
  EXPECT_EQ(layout->layer_offset(0), 0);
  EXPECT_EQ(layout->layer_offset(1), 0);
  EXPECT_EQ(layout->layer_offset(2), 5);
  EXPECT_EQ(layout->layer_offset(3), 7);
}

// Fusing random layers and unfusing them with LayerOf gives every layer back,
// for many random plans (the reference is the layers themselves: exact).
TEST(FusionLayoutTest, UnfusingRandomPlansGivesEveryLayerBack) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int num_layers = 1 + static_cast<int>(rng() % 12);
    std::vector<int64_t> sizes(num_layers);
    for (int64_t& size : sizes) size = 1 + static_cast<int64_t>(rng() % 50);
    std::vector<GroupLayout> groups;
    for (int first = 0; first < num_layers;) {
      const int n = 1 + static_cast<int>(rng() % (num_layers - first));
      groups.push_back({first, n});
      first += n;
    }
    absl::StatusOr<FusionLayout> layout = FusionLayout::Create(sizes, groups);
    ASSERT_TRUE(layout.ok()) << layout.status();
    std::vector<std::vector<float>> layers(num_layers);
    std::vector<std::vector<float>> fused(groups.size());
    for (size_t g = 0; g < groups.size(); ++g) fused[g].assign(layout->group_size(static_cast<int>(g)), -1.0f);
    for (int l = 0; l < num_layers; ++l) {
      for (int64_t i = 0; i < sizes[l]; ++i) layers[l].push_back(static_cast<float>(rng() % 1000) + 0.5f * l);
      std::vector<float>& buffer = fused[layout->group_of_layer(l)];
      std::copy(layers[l].begin(), layers[l].end(), buffer.begin() + layout->layer_offset(l));
    }
    for (const std::vector<float>& buffer : fused) {
      for (float v : buffer) ASSERT_NE(v, -1.0f) << "a group element no layer covers";
    }
    for (int l = 0; l < num_layers; ++l) {
      absl::Span<const float> back = layout->LayerOf(l, fused[layout->group_of_layer(l)]);
      ASSERT_EQ(std::vector<float>(back.begin(), back.end()), layers[l]) << "trial " << trial << " layer " << l;
    }
  }
}

TEST(FusionLayoutTest, RefusesPlansThatDoNotTileTheLayers) {
  struct Case {
    std::vector<int64_t> sizes;
    std::vector<GroupLayout> groups;
    const char* says;
  };
  const std::vector<Case> cases = {
      {{3, 5}, {{0, 1}}, "the groups cover 1 layers; the model has 2"},
      {{3, 5}, {{0, 1}, {2, 1}}, "group 1 starts at layer 2 with 1 layers; expected a non-empty range from layer 1"},
      {{3, 5}, {{0, 0}, {0, 2}}, "group 0 starts at layer 0 with 0 layers"},
      {{3, 5}, {{0, 3}}, "group 0 ends at layer 3; the model has 2"},
      {{3, 0}, {{0, 2}}, "layer 1 is empty"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<FusionLayout> layout = FusionLayout::Create(c.sizes, c.groups);
    ASSERT_FALSE(layout.ok()) << c.says;
    EXPECT_EQ(layout.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(layout.status().message().find(c.says), std::string::npos) << layout.status();
  }
}

}  // namespace
}  // namespace sketchfuse
