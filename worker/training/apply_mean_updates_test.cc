// ApplyMeanUpdates against the reference it replaces: the means written as
// dense gradients and torch's own SGD step. On random models and updates of
// many sizes the in-place step (no optimizer momentum) must give the same
// bits, and the momentum path must be the optimizer's.
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "torch/optim/sgd.h"
#include "worker/pipeline/fusion_layout.h"
#include "worker/training/classifier_workload.h"

namespace sketchfuse {
namespace {

struct Model {
  std::vector<torch::Tensor> params;  // forward order: layer l is params[n - 1 - l]
};

Model RandomModel(const std::vector<int64_t>& layer_sizes, uint32_t seed) {
  torch::manual_seed(seed);
  Model m;
  for (auto it = layer_sizes.rbegin(); it != layer_sizes.rend(); ++it) m.params.push_back(torch::randn({*it}));
  return m;
}

Model Clone(const Model& m) {
  Model c;
  for (const torch::Tensor& p : m.params) c.params.push_back(p.clone());
  return c;
}

// Each group's update: sparse at a random ~share of its coordinates, or dense.
std::vector<Update> RandomUpdates(const FusionLayout& layout, double share, bool dense, std::mt19937& rng) {
  std::normal_distribution<float> value(0, 3);
  std::uniform_real_distribution<double> pick(0, 1);
  std::vector<Update> updates;
  for (int g = 0; g < layout.num_groups(); ++g) {
    Update u;
    u.dim = static_cast<uint64_t>(layout.group_size(g));
    u.dense = dense;
    for (uint64_t i = 0; i < u.dim; ++i) {
      if (dense) {
        u.values.push_back(value(rng));
      } else if (pick(rng) < share) {
        u.indices.push_back(static_cast<uint32_t>(i));
        u.values.push_back(value(rng));
      }
    }
    updates.push_back(std::move(u));
  }
  return updates;
}

// The reference: the means as dense .grad and torch's SGD step.
void ReferenceStep(const std::vector<Update>& updates, const FusionLayout& layout, uint32_t world, double rate,
                   double momentum, Model& m, torch::optim::SGD& sgd) {
  std::vector<float> flat(static_cast<size_t>(layout.total_size()), 0.0f);
  const float scale = 1.0f / static_cast<float>(world);
  for (int g = 0; g < layout.num_groups(); ++g) {
    float* group = flat.data() + layout.group(g).begin;
    const Update& u = updates[g];
    if (u.dense) {
      for (size_t i = 0; i < u.values.size(); ++i) group[i] = u.values[i] * scale;
    } else {
      for (size_t j = 0; j < u.indices.size(); ++j) group[u.indices[j]] = u.values[j] * scale;
    }
  }
  const int n = static_cast<int>(m.params.size());
  for (int layer = 0; layer < n; ++layer) {
    absl::Span<const float> values = layout.LayerOf(layer, flat);
    m.params[n - 1 - layer].mutable_grad() =
        torch::from_blob(const_cast<float*>(values.data()), {static_cast<int64_t>(values.size())}).clone();
  }
  static_cast<torch::optim::SGDOptions&>(sgd.param_groups()[0].options()).lr(rate);
  sgd.step();
}

void ExpectSameBits(const Model& a, const Model& b) {
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i) {
    EXPECT_TRUE(torch::equal(a.params[i], b.params[i])) << "parameter " << i;
  }
}

TEST(ApplyMeanUpdatesTest, TheInPlaceStepIsTorchsSgdToTheBit) {
  torch::NoGradGuard no_grad;
  std::mt19937 rng(11);
  const std::vector<std::vector<int64_t>> models = {{1}, {7, 9}, {16, 33, 100}, {4097, 10, 1000, 3}, {100000, 37}};
  for (const std::vector<int64_t>& layers : models) {
    int64_t total = 0;
    for (int64_t l : layers) total += l;
    // One group, and partitions that cut layers.
    for (int groups : {1, 3}) {
      if (total < groups) continue;
      std::vector<GroupLayout> layout_groups;
      for (int g = 0; g < groups; ++g) {
        layout_groups.push_back({total * g / groups, total * (g + 1) / groups - total * g / groups});
      }
      absl::StatusOr<FusionLayout> layout = FusionLayout::Create(layers, layout_groups);
      ASSERT_TRUE(layout.ok()) << layout.status();
      for (bool dense : {false, true}) {
        for (uint32_t world : {1u, 3u, 4u}) {
          SCOPED_TRACE(testing::Message() << "layers " << layers.size() << ", total " << total << ", groups " << groups
                                          << (dense ? ", dense" : ", sparse") << ", world " << world);
          Model mine = RandomModel(layers, 5);
          Model reference = Clone(mine);
          torch::optim::SGD sgd_mine(mine.params, torch::optim::SGDOptions(0.1));
          torch::optim::SGD sgd_reference(reference.params, torch::optim::SGDOptions(0.1));
          std::vector<float> buffer;
          for (int step = 0; step < 3; ++step) {
            const double rate = 0.05 * (step + 1) / 3.0;
            const std::vector<Update> updates = RandomUpdates(*layout, 0.03, dense, rng);
            ASSERT_TRUE(ApplyMeanUpdates(updates, *layout, world, rate, mine.params, sgd_mine, &buffer).ok());
            ReferenceStep(updates, *layout, world, rate, 0, reference, sgd_reference);
          }
          ExpectSameBits(mine, reference);
        }
      }
    }
  }
}

TEST(ApplyMeanUpdatesTest, WithMomentumTheOptimizerSteps) {
  torch::NoGradGuard no_grad;
  std::mt19937 rng(3);
  const std::vector<int64_t> layers = {50, 20};
  absl::StatusOr<FusionLayout> layout = FusionLayout::Create(layers, {{0, 70}});
  ASSERT_TRUE(layout.ok());
  Model mine = RandomModel(layers, 9);
  Model reference = Clone(mine);
  torch::optim::SGD sgd_mine(mine.params, torch::optim::SGDOptions(0.1).momentum(0.9));
  torch::optim::SGD sgd_reference(reference.params, torch::optim::SGDOptions(0.1).momentum(0.9));
  std::vector<float> buffer;
  for (int step = 0; step < 4; ++step) {
    const std::vector<Update> updates = RandomUpdates(*layout, 0.2, step % 2 == 0, rng);
    ASSERT_TRUE(ApplyMeanUpdates(updates, *layout, 2, 0.07, mine.params, sgd_mine, &buffer).ok());
    ReferenceStep(updates, *layout, 2, 0.07, 0.9, reference, sgd_reference);
  }
  ExpectSameBits(mine, reference);
}

TEST(ApplyMeanUpdatesTest, AMisfitAppliesNothing) {
  torch::NoGradGuard no_grad;
  const std::vector<int64_t> layers = {5, 5};
  absl::StatusOr<FusionLayout> layout = FusionLayout::Create(layers, {{0, 6}, {6, 4}});
  ASSERT_TRUE(layout.ok());
  Model mine = RandomModel(layers, 1);
  const Model before = Clone(mine);
  torch::optim::SGD sgd(mine.params, torch::optim::SGDOptions(0.1));
  std::vector<float> buffer;
  Update fits;
  fits.dim = 6;
  fits.indices = {0, 5};
  fits.values = {1, 1};
  Update outside;
  outside.dim = 4;
  outside.indices = {4};  // past the group's 4 elements
  outside.values = {1};
  absl::Status s = ApplyMeanUpdates({fits, outside}, *layout, 1, 0.1, mine.params, sgd, &buffer);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_NE(s.message().find("group 1"), std::string::npos) << s;
  ExpectSameBits(mine, before);
  EXPECT_EQ(ApplyMeanUpdates({fits}, *layout, 1, 0.1, mine.params, sgd, &buffer).code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace sketchfuse
