// Fusion planners: the step-time simulation on hand-computed examples, the
// exact planner against brute force over every partition, the greedy and
// MergeComp baselines, the fixed plans, mode parsing, shard assignment and
// plan validation.
#include "common/fusion_planner.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/cost_model.h"
#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

// Group boundaries of a plan (the end layer of each group).
std::vector<int> Ends(const FusionPlan& plan) {
  std::vector<int> ends;
  for (const FusionGroup& g : plan.groups) {
    ends.push_back(g.first_layer + g.num_layers);
  }
  return ends;
}

// The plan whose groups end at `ends` (ascending, last == layers.size()).
FusionPlan PlanFromEnds(const std::vector<LayerTiming>& layers,
                        const std::vector<int>& ends) {
  FusionPlan plan;
  int first = 0;
  for (int end : ends) {
    int64_t n = 0;
    for (int l = first; l < end; ++l) n += layers[l].num_elements;
    plan.groups.push_back(FusionGroup{first, end - first, n});
    first = end;
  }
  return plan;
}

// Minimum SimulateStepTime over all 2^(L-1) partitions.
double BruteForceBest(const std::vector<LayerTiming>& layers,
                      const GroupCostModel& model) {
  const int num_layers = static_cast<int>(layers.size());
  double best = std::numeric_limits<double>::infinity();
  for (uint32_t mask = 0; mask < (1u << (num_layers - 1)); ++mask) {
    std::vector<int> ends;
    for (int b = 0; b < num_layers - 1; ++b) {
      if (mask & (1u << b)) ends.push_back(b + 1);
    }
    ends.push_back(num_layers);
    best = std::min(best,
                    SimulateStepTime(layers, PlanFromEnds(layers, ends), model));
  }
  return best;
}

std::vector<LayerTiming> RandomLayers(std::mt19937_64& rng, int num_layers) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<LayerTiming> layers(num_layers);
  for (LayerTiming& layer : layers) {
    // Log-uniform over [1, 1e7] elements.
    layer.num_elements = std::max<int64_t>(
        1, static_cast<int64_t>(std::llround(std::pow(10.0, 7.0 * u(rng)))));
    layer.backward_seconds = (u(rng) < 0.1) ? 0.0 : 1e-2 * u(rng);
  }
  return layers;
}

// Random model in one of several regimes: zero latency, ordinary, high
// transfer latency, expensive compress.
GroupCostModel RandomModel(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  GroupCostModel m;
  const int regime = static_cast<int>(rng() % 4);
  m.compress = {regime == 0 ? 0.0 : 1e-3 * u(rng), 1e-9 * u(rng)};
  m.transfer = {regime == 0 ? 0.0 : 1e-3 * u(rng), 1e-8 * u(rng)};
  m.decode = {regime == 0 ? 0.0 : 1e-4 * u(rng), 1e-9 * u(rng)};
  if (regime == 2) m.transfer.alpha = 0.05 + 0.1 * u(rng);
  if (regime == 3) m.compress.alpha = 0.01 + 0.05 * u(rng);
  return m;
}

const GroupCostModel kModel{{0.1, 0.001}, {0.5, 0.01}, {0.2, 0.002}};
const std::vector<LayerTiming> kThreeLayers{{100, 1.0}, {200, 2.0}, {300, 0.5}};

TEST(SimulateStepTimeTest, HandComputedThreeLayers) {
  // [0] [1 2]: ready0 = 1.0 + 0.2 = 1.2, end0 = 1.2 + 1.9 = 3.1;
  // ready1 = 1.2 + 2.5 + 0.6 = 4.3, end1 = 4.3 + 6.7 = 11.0.
  EXPECT_NEAR(SimulateStepTime(kThreeLayers, PlanFromEnds(kThreeLayers, {1, 3}),
                               kModel),
              11.0, 1e-12);
  // Per layer: end0 = 3.1; ready1 = 3.5, end1 = 6.6; ready2 = 4.4, the
  // pipeline is busy until 6.6, end2 = 6.6 + 4.3 = 10.9.
  EXPECT_NEAR(SimulateStepTime(kThreeLayers, PlanPerLayer(kThreeLayers), kModel),
              10.9, 1e-12);
  // Single: ready = 3.5 + 0.7 = 4.2, end = 4.2 + 7.9 = 12.1.
  EXPECT_NEAR(SimulateStepTime(kThreeLayers, PlanSingle(kThreeLayers), kModel),
              12.1, 1e-12);
  EXPECT_EQ(SimulateStepTime({}, FusionPlan{}, kModel), 0.0);
}

TEST(PlanOptimalTest, HandComputedThreeLayers) {
  absl::StatusOr<FusionPlan> plan = PlanOptimal(kThreeLayers, kModel);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // [0 1] [2]: ready0 = 3.0 + 0.4 = 3.4, end0 = 3.4 + 3.0 + 0.2 + 0.6 = 7.2;
  // ready1 = 3.4 + 0.5 + 0.4 = 4.3, end1 = 7.2 + 4.3 = 11.5. Per layer wins.
  EXPECT_EQ(Ends(*plan), (std::vector<int>{1, 2, 3}));
  EXPECT_NEAR(SimulateStepTime(kThreeLayers, *plan, kModel), 10.9, 1e-12);
}

TEST(PlanOptimalTest, MatchesBruteForceOnRandomInstances) {
  std::mt19937_64 rng(2024);
  for (int trial = 0; trial < 200; ++trial) {
    const int num_layers = 1 + trial % 12;
    const std::vector<LayerTiming> layers = RandomLayers(rng, num_layers);
    const GroupCostModel model = RandomModel(rng);
    absl::StatusOr<FusionPlan> plan = PlanOptimal(layers, model);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_TRUE(ValidatePlan(layers, *plan).ok())
        << ValidatePlan(layers, *plan);
    const double best = BruteForceBest(layers, model);
    const double got = SimulateStepTime(layers, *plan, model);
    EXPECT_NEAR(got, best, 1e-9 * best) << "trial " << trial;

    absl::StatusOr<FusionPlan> omgs = PlanOmgsGreedy(layers, model);
    ASSERT_TRUE(omgs.ok()) << omgs.status();
    ASSERT_TRUE(ValidatePlan(layers, *omgs).ok()) << ValidatePlan(layers, *omgs);
    EXPECT_GE(SimulateStepTime(layers, *omgs, model), best * (1 - 1e-9))
        << "trial " << trial;
  }
}

TEST(PlanOptimalTest, PlansTwoHundredLayersNoWorseThanBaselines) {
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 4; ++trial) {
    const std::vector<LayerTiming> layers = RandomLayers(rng, 200);
    const GroupCostModel model = RandomModel(rng);
    absl::StatusOr<FusionPlan> plan = PlanOptimal(layers, model);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_TRUE(ValidatePlan(layers, *plan).ok()) << ValidatePlan(layers, *plan);
    const double best = SimulateStepTime(layers, *plan, model);
    absl::StatusOr<FusionPlan> omgs = PlanOmgsGreedy(layers, model);
    absl::StatusOr<FusionPlan> equal4 = PlanEqualGroups(layers, 4);
    ASSERT_TRUE(omgs.ok() && equal4.ok());
    for (const FusionPlan& other :
         {PlanPerLayer(layers), PlanSingle(layers), *omgs, *equal4}) {
      EXPECT_LE(best, SimulateStepTime(layers, other, model) * (1 + 1e-9))
          << "trial " << trial;
    }
  }
}

TEST(PlanOptimalTest, HugeTransferLatencyGivesSingleGroup) {
  std::mt19937_64 rng(3);
  const std::vector<LayerTiming> layers = RandomLayers(rng, 30);
  const GroupCostModel model{{1e-4, 1e-10}, {100.0, 1e-9}, {1e-5, 1e-10}};
  absl::StatusOr<FusionPlan> plan = PlanOptimal(layers, model);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->groups.size(), 1u);
  EXPECT_EQ(plan->groups[0].num_layers, 30);
}

TEST(PlanOptimalTest, ExpensiveCompressLatencyGivesSingleGroup) {
  std::mt19937_64 rng(4);
  const std::vector<LayerTiming> layers = RandomLayers(rng, 30);
  // Each extra group costs 10 s of compute; communication is free of latency.
  const GroupCostModel model{{10.0, 0}, {0, 1e-9}, {0, 1e-10}};
  absl::StatusOr<FusionPlan> plan = PlanOptimal(layers, model);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->groups.size(), 1u);
}

TEST(PlanOptimalTest, NoLatencyAnywhereMatchesPerLayer) {
  // With every alpha zero, splitting a group never delays anything, so the
  // per-layer plan attains the optimum (other plans may tie).
  std::mt19937_64 rng(5);
  const std::vector<LayerTiming> layers = RandomLayers(rng, 40);
  const GroupCostModel model{{0, 1e-10}, {0, 5e-9}, {0, 1e-10}};
  absl::StatusOr<FusionPlan> plan = PlanOptimal(layers, model);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const double per_layer = SimulateStepTime(layers, PlanPerLayer(layers), model);
  EXPECT_NEAR(SimulateStepTime(layers, *plan, model), per_layer,
              1e-9 * per_layer);
}

TEST(PlanOptimalTest, RejectsBadInput) {
  const GroupCostModel model = kModel;
  EXPECT_EQ(PlanOptimal({}, model).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanOptimal({{0, 1.0}}, model).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanOptimal({{10, 1.0}, {-5, 1.0}}, model).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanOptimal({{10, -1.0}}, model).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanOptimal({{10, std::numeric_limits<double>::infinity()}}, model)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanOptimal({{10, std::nan("")}}, model).status().code(),
            absl::StatusCode::kInvalidArgument);
  GroupCostModel bad = kModel;
  bad.transfer.beta = std::numeric_limits<double>::infinity();
  EXPECT_EQ(PlanOptimal({{10, 1.0}}, bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanOmgsGreedy({}, model).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanOmgsGreedy({{10, -1.0}}, model).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PlanOmgsGreedyTest, MergesUnderHighLatencyAndSplitsWithoutIt) {
  const std::vector<LayerTiming> layers(10, LayerTiming{1000, 1e-3});
  // Latency far above any wait: everything merges.
  absl::StatusOr<FusionPlan> merged =
      PlanOmgsGreedy(layers, {{0, 0}, {1.0, 1e-9}, {0, 0}});
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(merged->groups.size(), 1u);
  // No latency and a pipeline faster than the backward: t_save = 0 and
  // t_wait = t_b > 0, so every layer gets its own group.
  absl::StatusOr<FusionPlan> split =
      PlanOmgsGreedy(layers, {{0, 0}, {0, 1e-9}, {0, 0}});
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(split->groups.size(), 10u);
}

// Two-group split plan for MergeComp.
FusionPlan Split(const std::vector<LayerTiming>& layers, int split) {
  const int num_layers = static_cast<int>(layers.size());
  if (split == num_layers) return PlanFromEnds(layers, {num_layers});
  return PlanFromEnds(layers, {split, num_layers});
}

TEST(PlanMergeCompSearchTest, FindsBestSplitWithLogarithmicProbes) {
  for (int num_layers : {3, 16, 64, 200}) {
    const std::vector<LayerTiming> layers(num_layers, LayerTiming{1000000, 1e-3});
    const GroupCostModel model{{1e-4, 1e-11}, {1e-4, 2e-9}, {1e-5, 1e-11}};
    std::vector<double> times(num_layers + 1);
    for (int s = 1; s <= num_layers; ++s) {
      times[s] = SimulateStepTime(layers, Split(layers, s), model);
    }
    // The instance is unimodal: non-increasing, then non-decreasing.
    int s = 1;
    while (s < num_layers && times[s + 1] < times[s]) ++s;
    while (s < num_layers && times[s + 1] >= times[s]) ++s;
    ASSERT_EQ(s, num_layers) << "instance not unimodal for L=" << num_layers;
    const double best = *std::min_element(times.begin() + 1, times.end());

    int probes = -1;
    int calls = 0;
    absl::StatusOr<FusionPlan> plan = PlanMergeCompSearch(
        layers,
        [&](int split) {
          ++calls;
          EXPECT_GE(split, 1);
          EXPECT_LE(split, num_layers);
          return SimulateStepTime(layers, Split(layers, split), model);
        },
        &probes);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_TRUE(ValidatePlan(layers, *plan).ok());
    EXPECT_NEAR(SimulateStepTime(layers, *plan, model), best, 1e-12 * best);
    EXPECT_EQ(probes, calls);
    const int log2 = static_cast<int>(std::ceil(std::log2(num_layers)));
    EXPECT_LE(probes, 2 * log2 + 2) << "L=" << num_layers;
  }
}

TEST(PlanMergeCompSearchTest, OneAndTwoLayers) {
  const std::vector<LayerTiming> one{{10, 1.0}};
  int probes = -1;
  absl::StatusOr<FusionPlan> plan =
      PlanMergeCompSearch(one, [](int) { return 1.0; }, &probes);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Ends(*plan), (std::vector<int>{1}));
  EXPECT_LE(probes, 1);

  const std::vector<LayerTiming> two{{10, 1.0}, {20, 1.0}};
  plan = PlanMergeCompSearch(
      two, [](int s) { return s == 1 ? 1.0 : 2.0; }, &probes);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Ends(*plan), (std::vector<int>{1, 2}));
  EXPECT_EQ(plan->groups[1].num_elements, 20);
  EXPECT_EQ(probes, 2);
  plan = PlanMergeCompSearch(two, [](int s) { return s == 1 ? 2.0 : 1.0; });
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Ends(*plan), (std::vector<int>{2}));
  EXPECT_EQ(plan->groups[0].num_elements, 30);
}

TEST(PlanMergeCompSearchTest, RejectsBadInput) {
  const std::vector<LayerTiming> two{{10, 1.0}, {20, 1.0}};
  EXPECT_EQ(PlanMergeCompSearch({}, [](int) { return 1.0; }).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanMergeCompSearch(two, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanMergeCompSearch(two, [](int) { return std::nan(""); })
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FixedPlansTest, PerLayerAndSingle) {
  EXPECT_EQ(Ends(PlanPerLayer(kThreeLayers)), (std::vector<int>{1, 2, 3}));
  const FusionPlan single = PlanSingle(kThreeLayers);
  EXPECT_EQ(Ends(single), (std::vector<int>{3}));
  EXPECT_EQ(single.groups[0].num_elements, 600);
  EXPECT_TRUE(PlanPerLayer({}).groups.empty());
  EXPECT_TRUE(PlanSingle({}).groups.empty());
}

TEST(PlanEqualGroupsTest, SplitsByElements) {
  const std::vector<LayerTiming> eight(8, LayerTiming{5, 0.1});
  absl::StatusOr<FusionPlan> plan = PlanEqualGroups(eight, 4);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Ends(*plan), (std::vector<int>{2, 4, 6, 8}));
  EXPECT_TRUE(ValidatePlan(eight, *plan).ok());

  const std::vector<LayerTiming> uneven{{100, 0}, {1, 0}, {1, 0},
                                        {1, 0},   {1, 0}, {100, 0}};
  plan = PlanEqualGroups(uneven, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Ends(*plan), (std::vector<int>{3, 6}));

  // A dominant layer: still one non-empty group per layer.
  const std::vector<LayerTiming> skewed{{1000, 0}, {1, 0}, {1, 0}};
  plan = PlanEqualGroups(skewed, 3);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Ends(*plan), (std::vector<int>{1, 2, 3}));
  plan = PlanEqualGroups(std::vector<LayerTiming>{{1, 0}, {1, 0}, {1000, 0}}, 3);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Ends(*plan), (std::vector<int>{1, 2, 3}));

  // Clamped to the layer count.
  plan = PlanEqualGroups(eight, 100);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->groups.size(), 8u);
  plan = PlanEqualGroups(eight, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Ends(*plan), (std::vector<int>{8}));

  std::mt19937_64 rng(8);
  for (int n = 1; n <= 60; ++n) {
    const std::vector<LayerTiming> layers = RandomLayers(rng, 1 + n % 37);
    plan = PlanEqualGroups(layers, n);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_TRUE(ValidatePlan(layers, *plan).ok()) << ValidatePlan(layers, *plan);
    EXPECT_EQ(plan->groups.size(),
              static_cast<size_t>(std::min<int>(n, layers.size())));
  }
}

TEST(PlanEqualGroupsTest, RejectsBadCount) {
  EXPECT_EQ(PlanEqualGroups(kThreeLayers, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanEqualGroups(kThreeLayers, -2).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanEqualGroups(std::vector<LayerTiming>{{0, 1.0}}, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PlanByModeTest, EveryMode) {
  absl::StatusOr<FusionPlan> plan = PlanByMode("optimal", kThreeLayers, kModel);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Ends(*plan), Ends(*PlanOptimal(kThreeLayers, kModel)));
  plan = PlanByMode("omgs", kThreeLayers, kModel);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Ends(*plan), Ends(*PlanOmgsGreedy(kThreeLayers, kModel)));
  plan = PlanByMode("per_layer", kThreeLayers, kModel);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Ends(*plan), (std::vector<int>{1, 2, 3}));
  plan = PlanByMode("single", kThreeLayers, kModel);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Ends(*plan), (std::vector<int>{3}));
  plan = PlanByMode("2", kThreeLayers, kModel);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Ends(*plan), Ends(*PlanEqualGroups(kThreeLayers, 2)));
  plan = PlanByMode("7", kThreeLayers, kModel);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->groups.size(), 3u);
}

TEST(PlanByModeTest, MergeCompSearchesTwoGroupPlansOnTheModel) {
  absl::StatusOr<FusionPlan> plan = PlanByMode("mergecomp", kThreeLayers, kModel);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_LE(plan->groups.size(), 2u);
  // The same split a search over the model's step times finds.
  absl::StatusOr<FusionPlan> direct = PlanMergeCompSearch(kThreeLayers, [](int split) {
    const FusionPlan two = PlanFromEnds(kThreeLayers, split < 3 ? std::vector<int>{split, 3} : std::vector<int>{3});
    return SimulateStepTime(kThreeLayers, two, kModel);
  });
  ASSERT_TRUE(direct.ok()) << direct.status();
  EXPECT_EQ(Ends(*plan), Ends(*direct));
}

TEST(PlanByModeTest, RejectsBadModes) {
  for (const char* mode : {"0", "-3", "abc", "", "Optimal", "MergeComp"}) {
    absl::StatusOr<FusionPlan> plan = PlanByMode(mode, kThreeLayers, kModel);
    ASSERT_FALSE(plan.ok()) << mode;
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument) << mode;
    const absl::string_view message = plan.status().message();
    EXPECT_NE(message.find("\"optimal\""), absl::string_view::npos) << message;
    EXPECT_NE(message.find("\"mergecomp\""), absl::string_view::npos) << message;
    EXPECT_NE(message.find("\"per_layer\""), absl::string_view::npos)
        << message;
  }
  EXPECT_EQ(PlanByMode("single", {}, kModel).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Found by job_config_fuzzer (UBSan: signed overflow of a shard's load).
TEST(AssignGroupsToShardsTest, HugeSizesSaturateAndNegativeOnesAreRefused) {
  FusionPlan plan;
  const int64_t max = std::numeric_limits<int64_t>::max();
  for (int64_t n : {max, int64_t{8444249301319679}, max, int64_t{1}}) plan.groups.push_back(FusionGroup{0, 1, n});
  absl::StatusOr<std::vector<int>> shards = AssignGroupsToShards(plan, 1);
  ASSERT_TRUE(shards.ok()) << shards.status();
  EXPECT_EQ(*shards, (std::vector<int>{0, 0, 0, 0}));
  shards = AssignGroupsToShards(plan, 2);
  ASSERT_TRUE(shards.ok()) << shards.status();
  // 0 and 2 (the largest) on shards 0 and 1; then both shards are full and
  // tie, and the lower index takes the rest.
  EXPECT_EQ(*shards, (std::vector<int>{0, 0, 1, 0}));
  plan.groups.push_back(FusionGroup{0, 1, -5});
  EXPECT_EQ(AssignGroupsToShards(plan, 2).status().message(), "group 4 has a negative size (-5)");
}

TEST(AssignGroupsToShardsTest, BalancesLoads) {
  FusionPlan plan;
  int first = 0;
  for (int64_t n : {10, 7, 5, 4, 3, 1}) {
    plan.groups.push_back(FusionGroup{first++, 1, n});
  }
  absl::StatusOr<std::vector<int>> shards = AssignGroupsToShards(plan, 2);
  ASSERT_TRUE(shards.ok()) << shards.status();
  // 10->0, 7->1, 5->1 (12), 4->0 (14), 3->1 (15), 1->0 (15).
  EXPECT_EQ(*shards, (std::vector<int>{0, 1, 1, 0, 1, 0}));

  shards = AssignGroupsToShards(plan, 3);
  ASSERT_TRUE(shards.ok()) << shards.status();
  std::vector<int64_t> loads(3, 0);
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    loads[(*shards)[g]] += plan.groups[g].num_elements;
  }
  EXPECT_EQ(loads, (std::vector<int64_t>{10, 10, 10}));

  // More shards than groups: one group each, lower shards first.
  shards = AssignGroupsToShards(plan, 100);
  ASSERT_TRUE(shards.ok()) << shards.status();
  EXPECT_EQ(*shards, (std::vector<int>{0, 1, 2, 3, 4, 5}));

  // Equal sizes: ties go to the lower group index and the lower shard.
  FusionPlan equal;
  for (int g = 0; g < 4; ++g) equal.groups.push_back(FusionGroup{g, 1, 8});
  shards = AssignGroupsToShards(equal, 2);
  ASSERT_TRUE(shards.ok()) << shards.status();
  EXPECT_EQ(*shards, (std::vector<int>{0, 1, 0, 1}));

  shards = AssignGroupsToShards(FusionPlan{}, 4);
  ASSERT_TRUE(shards.ok()) << shards.status();
  EXPECT_TRUE(shards->empty());
}

TEST(AssignGroupsToShardsTest, RejectsBadShardCount) {
  EXPECT_EQ(AssignGroupsToShards(PlanSingle(kThreeLayers), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AssignGroupsToShards(PlanSingle(kThreeLayers), -1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

void ExpectInvalidPlan(const FusionPlan& plan, const std::string& needle) {
  const absl::Status status = ValidatePlan(kThreeLayers, plan);
  ASSERT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find(needle), absl::string_view::npos) << status;
}

TEST(ValidatePlanTest, AcceptsGoodAndRejectsBadPlans) {
  EXPECT_TRUE(ValidatePlan(kThreeLayers, PlanPerLayer(kThreeLayers)).ok());
  EXPECT_TRUE(ValidatePlan(kThreeLayers, PlanSingle(kThreeLayers)).ok());
  EXPECT_TRUE(ValidatePlan({}, FusionPlan{}).ok());

  ExpectInvalidPlan(FusionPlan{{{0, 1, 100}, {2, 1, 300}}}, "gap");
  ExpectInvalidPlan(FusionPlan{{{1, 2, 500}}}, "gap");
  ExpectInvalidPlan(FusionPlan{{{0, 2, 300}, {1, 2, 500}}}, "overlap");
  ExpectInvalidPlan(FusionPlan{{{0, 1, 100}, {1, 2, 499}}}, "num_elements=499");
  ExpectInvalidPlan(FusionPlan{{{0, 0, 0}, {0, 3, 600}}}, "empty");
  ExpectInvalidPlan(FusionPlan{{{0, 4, 600}}}, "beyond");
  ExpectInvalidPlan(FusionPlan{{{0, 2, 300}}}, "no group");
  ExpectInvalidPlan(FusionPlan{}, "no group");
}

}  // namespace
}  // namespace sketchfuse
