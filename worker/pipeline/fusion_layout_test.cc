#include "worker/pipeline/fusion_layout.h"

#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

TEST(FusionLayoutTest, PlacesLayersOneAfterAnotherInTheirGroup) {
  // Layers of 3, 5, 2 and 4 elements; groups of layer 0 and layers 1 to 3.
  absl::StatusOr<FusionLayout> layout = FusionLayout::Create({3, 5, 2, 4}, {{0, 3}, {3, 11}});
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->num_groups(), 2);
  EXPECT_EQ(layout->group_sizes(), (std::vector<int64_t>{3, 11}));
  EXPECT_EQ(layout->total_size(), 14);
  ASSERT_EQ(layout->pieces(0).size(), 1u);
  EXPECT_EQ(layout->pieces(0)[0].group, 0);
  EXPECT_EQ(layout->pieces(3)[0].group, 1);
  EXPECT_EQ(layout->pieces(1)[0].group_offset, 0);
  EXPECT_EQ(layout->pieces(2)[0].group_offset, 5);
  EXPECT_EQ(layout->pieces(3)[0].group_offset, 7);
  EXPECT_EQ(layout->layers_in_group(0), 1);
  EXPECT_EQ(layout->layers_in_group(1), 3);
  EXPECT_EQ(layout->layer_begin(3), 10);
}

TEST(FusionLayoutTest, CutsALayerAtPartitionBoundaries) {
  // One fused group of layers of 4 and 6 elements, in partitions of 5, 3, 2.
  absl::StatusOr<FusionLayout> layout = FusionLayout::Create({4, 6}, {{0, 5}, {5, 3}, {8, 2}});
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_EQ(layout->pieces(0).size(), 1u);
  ASSERT_EQ(layout->pieces(1).size(), 3u);
  const LayerPiece& first = layout->pieces(1)[0];
  EXPECT_EQ(first.group, 0);
  EXPECT_EQ(first.group_offset, 4);
  EXPECT_EQ(first.layer_offset, 0);
  EXPECT_EQ(first.size, 1);
  const LayerPiece& last = layout->pieces(1)[2];
  EXPECT_EQ(last.group, 2);
  EXPECT_EQ(last.group_offset, 0);
  EXPECT_EQ(last.layer_offset, 4);
  EXPECT_EQ(last.size, 2);
  EXPECT_EQ(layout->layers_in_group(0), 2);
  EXPECT_EQ(layout->layers_in_group(1), 1);
}

// Fusing random layers into random groups (whole layers or partitions cut
// anywhere) and unfusing them gives every layer back, for many random plans
// (the reference is the layers themselves: exact).
TEST(FusionLayoutTest, UnfusingRandomPlansGivesEveryLayerBack) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int num_layers = 1 + static_cast<int>(rng() % 12);
    std::vector<int64_t> sizes(num_layers);
    for (int64_t& size : sizes) size = 1 + static_cast<int64_t>(rng() % 50);
    const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
    std::vector<GroupLayout> groups;
    for (int64_t begin = 0; begin < total;) {
      const int64_t n = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(total - begin));
      groups.push_back({begin, n});
      begin += n;
    }
    absl::StatusOr<FusionLayout> layout = FusionLayout::Create(sizes, groups);
    ASSERT_TRUE(layout.ok()) << layout.status();
    std::vector<std::vector<float>> layers(num_layers);
    std::vector<std::vector<float>> fused(groups.size());
    for (size_t g = 0; g < groups.size(); ++g) fused[g].assign(layout->group_size(static_cast<int>(g)), -1.0f);
    std::vector<int> layers_seen(groups.size(), 0);
    for (int l = 0; l < num_layers; ++l) {
      for (int64_t i = 0; i < sizes[l]; ++i) layers[l].push_back(static_cast<float>(rng() % 1000) + 0.5f * l);
      int64_t covered = 0;
      for (const LayerPiece& piece : layout->pieces(l)) {
        ASSERT_EQ(piece.layer_offset, covered);
        std::copy(layers[l].begin() + piece.layer_offset, layers[l].begin() + piece.layer_offset + piece.size,
                  fused[piece.group].begin() + piece.group_offset);
        covered += piece.size;
        ++layers_seen[piece.group];
      }
      ASSERT_EQ(covered, sizes[l]);
    }
    for (size_t g = 0; g < groups.size(); ++g) {
      EXPECT_EQ(layers_seen[g], layout->layers_in_group(static_cast<int>(g)));
      for (float v : fused[g]) ASSERT_NE(v, -1.0f) << "a group element no layer covers";
    }
    // Unfuse through the flat vector, as a worker applies an update.
    std::vector<float> flat;
    for (const std::vector<float>& buffer : fused) flat.insert(flat.end(), buffer.begin(), buffer.end());
    for (int l = 0; l < num_layers; ++l) {
      absl::Span<const float> back = layout->LayerOf(l, flat);
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
      {{3, 5}, {{0, 3}}, "the groups cover 3 elements; the model has 8"},
      {{3, 5}, {{0, 3}, {4, 4}}, "group 1 holds elements [4, 8); expected a non-empty range from element 3"},
      {{3, 5}, {{0, 0}, {0, 8}}, "group 0 holds elements [0, 0)"},
      {{3, 5}, {{0, 9}}, "group 0 ends at element 9; the model has 8"},
      {{3, 0}, {{0, 3}}, "layer 1 is empty"},
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
