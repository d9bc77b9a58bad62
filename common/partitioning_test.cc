#include "common/partitioning.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include "common/fusion_planner.h"
#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

// The shards' loads when `partitions` go to shards as AssignGroupsToShards
// puts them.
std::vector<int64_t> ShardLoads(const std::vector<Partition>& partitions, int num_shards) {
  FusionPlan plan;
  for (const Partition& p : partitions) plan.groups.push_back({0, 1, p.num_elements});
  absl::StatusOr<std::vector<int>> shard_of = AssignGroupsToShards(plan, num_shards);
  EXPECT_TRUE(shard_of.ok()) << shard_of.status();
  std::vector<int64_t> loads(num_shards, 0);
  for (size_t i = 0; i < partitions.size(); ++i) loads[(*shard_of)[i]] += partitions[i].num_elements;
  return loads;
}

// The smallest possible largest load, by trying every assignment (small
// cases only): the reference LPT is held to.
int64_t OptimalMaxLoad(const std::vector<Partition>& partitions, int num_shards) {
  std::vector<int64_t> loads(num_shards, 0);
  int64_t best = INT64_MAX;
  std::function<void(size_t)> place = [&](size_t i) {
    if (i == partitions.size()) {
      best = std::min(best, *std::max_element(loads.begin(), loads.end()));
      return;
    }
    for (int s = 0; s < num_shards; ++s) {
      loads[s] += partitions[i].num_elements;
      if (loads[s] < best) place(i + 1);
      loads[s] -= partitions[i].num_elements;
    }
  };
  place(0);
  return best;
}

TEST(ParsePartitionElementsTest, TakesDigitsOnly) {
  uint64_t bound = 7;
  EXPECT_TRUE(ParsePartitionElements("0", &bound));
  EXPECT_EQ(bound, 0u);
  EXPECT_TRUE(ParsePartitionElements("58787", &bound));
  EXPECT_EQ(bound, 58787u);
  for (const char* bad : {"", "-5", "+5", "1.5", "many", "18446744073709551616", " 5"}) {
    EXPECT_FALSE(ParsePartitionElements(bad, &bound)) << bad;
  }
}

TEST(CutGroupsTest, BoundZeroKeepsGroupsWhole) {
  absl::StatusOr<std::vector<Partition>> parts = CutGroups({5, 7}, 0);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[1].fused_group, 1);
  EXPECT_EQ((*parts)[1].offset, 0);
  EXPECT_EQ((*parts)[1].num_elements, 7);
}

TEST(CutGroupsTest, EqualPartsLargerFirst) {
  absl::StatusOr<std::vector<Partition>> parts = CutGroups({10}, 4);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 3u);  // ceil(10 / 4)
  EXPECT_EQ((*parts)[0].num_elements, 4);
  EXPECT_EQ((*parts)[1].num_elements, 3);
  EXPECT_EQ((*parts)[2].num_elements, 3);
  EXPECT_EQ((*parts)[2].offset, 7);
}

TEST(CutGroupsTest, RefusesBadInput) {
  EXPECT_EQ(CutGroups({5}, -1).status().code(), absl::StatusCode::kInvalidArgument);
  absl::Status empty = CutGroups({5, 0}, 2).status();
  EXPECT_EQ(empty.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(empty.message().find("fused group 1"), absl::string_view::npos) << empty;
}

// Random plans against a reference that walks every coordinate: each
// coordinate of each group lies in exactly one partition, partitions respect
// the bound, are as few as the bound allows and differ by at most one
// element within a group; LPT over them stays within one partition of the
// mean and within 4/3 of the best assignment.
TEST(CutGroupsTest, RandomPlansAgainstReference) {
  std::mt19937_64 rng(20261126);
  for (int trial = 0; trial < 300; ++trial) {
    const int num_groups = 1 + static_cast<int>(rng() % 6);
    std::vector<int64_t> sizes;
    for (int g = 0; g < num_groups; ++g) sizes.push_back(1 + static_cast<int64_t>(rng() % 5000));
    const int num_shards = 1 + static_cast<int>(rng() % 4);
    const int64_t bound = trial % 3 == 0 ? DefaultPartitionElements(sizes, num_shards) / 64
                                         : 1 + static_cast<int64_t>(rng() % 3000);
    absl::StatusOr<std::vector<Partition>> parts = CutGroups(sizes, bound);
    ASSERT_TRUE(parts.ok()) << parts.status();

    std::vector<std::vector<int>> owner(num_groups);
    for (int g = 0; g < num_groups; ++g) owner[g].assign(sizes[g], 0);
    std::vector<int64_t> count(num_groups, 0), smallest(num_groups, INT64_MAX), largest(num_groups, 0);
    for (const Partition& p : *parts) {
      ASSERT_GE(p.fused_group, 0);
      ASSERT_LT(p.fused_group, num_groups);
      ASSERT_GE(p.num_elements, 1);
      if (bound > 0) ASSERT_LE(p.num_elements, bound);
      for (int64_t i = p.offset; i < p.offset + p.num_elements; ++i) {
        ASSERT_LT(i, sizes[p.fused_group]);
        ++owner[p.fused_group][i];
      }
      ++count[p.fused_group];
      smallest[p.fused_group] = std::min(smallest[p.fused_group], p.num_elements);
      largest[p.fused_group] = std::max(largest[p.fused_group], p.num_elements);
    }
    for (int g = 0; g < num_groups; ++g) {
      for (int64_t i = 0; i < sizes[g]; ++i) ASSERT_EQ(owner[g][i], 1) << "group " << g << " element " << i;
      EXPECT_EQ(count[g], bound == 0 ? 1 : (sizes[g] + bound - 1) / bound);
      EXPECT_LE(largest[g] - smallest[g], 1);
    }

    const std::vector<int64_t> loads = ShardLoads(*parts, num_shards);
    const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
    EXPECT_EQ(std::accumulate(loads.begin(), loads.end(), int64_t{0}), total);
    int64_t max_part = 0;
    for (const Partition& p : *parts) max_part = std::max(max_part, p.num_elements);
    const int64_t max_load = *std::max_element(loads.begin(), loads.end());
    EXPECT_LE(max_load, (total + num_shards - 1) / num_shards + max_part);
    if (parts->size() <= 9) {
      EXPECT_LE(3 * max_load, 4 * OptimalMaxLoad(*parts, num_shards)) << "trial " << trial;
    }
  }
}

// The default bound gives a one-group model's shards two equal partitions
// each, and unequal groups as many more as balance needs.
TEST(DefaultPartitionElementsTest, OneGroupIsSplitEvenly) {
  EXPECT_EQ(DefaultPartitionElements({235146}, 1), 0);
  for (int shards : {2, 3, 4, 8}) {
    const int64_t bound = DefaultPartitionElements({235146}, shards);
    absl::StatusOr<std::vector<Partition>> parts = CutGroups({235146}, bound);
    ASSERT_TRUE(parts.ok());
    EXPECT_EQ(parts->size(), static_cast<size_t>(2 * shards));
    const std::vector<int64_t> loads = ShardLoads(*parts, shards);
    const auto [low, high] = std::minmax_element(loads.begin(), loads.end());
    EXPECT_LE(*high - *low, 2) << shards << " shards";
  }
  // Small models are not cut below the floor.
  EXPECT_EQ(DefaultPartitionElements({1000}, 4), kMinDefaultPartitionElements);
}

// On random plans the default is the coarsest of its candidates that
// balances within kDefaultBalance (or the finest), as a direct search finds.
TEST(DefaultPartitionElementsTest, RandomPlansAreBalancedWithTheFewestPartitions) {
  std::mt19937_64 rng(34);
  int finer = 0;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int64_t> sizes;
    for (int g = 0, n = 1 + static_cast<int>(rng() % 8); g < n; ++g) sizes.push_back(1 + rng() % 400000);
    const int shards = 2 + static_cast<int>(rng() % 6);
    const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
    const int64_t bound = DefaultPartitionElements(sizes, shards);
    auto balanced = [&](int64_t b) {
      const std::vector<int64_t> loads = ShardLoads(*CutGroups(sizes, b), shards);
      return static_cast<double>(*std::max_element(loads.begin(), loads.end())) <=
             kDefaultBalance * static_cast<double>(total) / shards;
    };
    int64_t expected = 0;
    for (int64_t m : {2, 4, 8}) {
      expected = std::max(kMinDefaultPartitionElements, (total + m * shards - 1) / (m * shards));
      if (balanced(expected)) break;
    }
    EXPECT_EQ(bound, expected) << "trial " << trial;
    if (bound < (total + 2 * shards - 1) / (2 * shards)) ++finer;
  }
  EXPECT_GT(finer, 0) << "no plan needed more than two partitions per shard: the search was not exercised";
}

}  // namespace
}  // namespace sketchfuse
