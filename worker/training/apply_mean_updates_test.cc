// ApplyMeanUpdates against the reference it replaces: the means written as
// dense gradients and torch's own optimizer step. On random models and
// updates of many sizes the in-place step (no optimizer momentum) must give
// the same bits, and the momentum, Adam and AdamW paths the optimizer's
// (MakeOptimizer's, from the run's spec, against one built by hand); Adam
// and AdamW also against their formulas in double precision (relative
// 1e-5), and Adam's moments on the worker with every coordinate sent against
// AdamW's formula.
#include <random>
#include <vector>

#include <cmath>

#include "gtest/gtest.h"
#include "torch/optim/adam.h"
#include "torch/optim/adamw.h"
#include "torch/optim/sgd.h"
#include "worker/compression/group_compressors.h"
#include "worker/compression/settlement.h"
#include "worker/pipeline/fusion_layout.h"
#include "worker/schemes/scheme_registry.h"
#include "worker/training/optimizer.h"

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
                   double momentum, Model& m, torch::optim::Optimizer& optimizer) {
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
  optimizer.param_groups()[0].options().set_lr(rate);
  optimizer.step();
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

// Adam's and AdamW's update of one coordinate, in double precision: the
// formulas of torch.optim (bias-corrected moments; Adam's decay added to the
// gradient, AdamW's applied to the parameter).
struct AdamReference {
  double beta1, beta2, eps, decay;
  bool decoupled;
  std::vector<double> p, m, v;
  int64_t t = 0;

  void Step(const std::vector<double>& grad, double rate) {
    ++t;
    for (size_t i = 0; i < p.size(); ++i) {
      double g = grad[i];
      if (decoupled) {
        p[i] *= 1 - rate * decay;
      } else {
        g += decay * p[i];
      }
      m[i] = beta1 * m[i] + (1 - beta1) * g;
      v[i] = beta2 * v[i] + (1 - beta2) * g * g;
      const double m_hat = m[i] / (1 - std::pow(beta1, t)), v_hat = v[i] / (1 - std::pow(beta2, t));
      p[i] -= rate * m_hat / (std::sqrt(v_hat) + eps);
    }
  }
};

std::vector<double> Flat(const Model& m) {
  std::vector<double> out;
  for (const torch::Tensor& p : m.params) {
    for (int64_t i = 0; i < p.numel(); ++i) out.push_back(p[i].item<float>());
  }
  return out;
}

// The means a step's updates give each coordinate (forward order, as Flat).
std::vector<double> MeanGradient(const std::vector<Update>& updates, const FusionLayout& layout, uint32_t world,
                                 const Model& m) {
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
  std::vector<double> out;
  const int n = static_cast<int>(m.params.size());
  for (int i = 0; i < n; ++i) {
    absl::Span<const float> values = layout.LayerOf(n - 1 - i, flat);
    out.insert(out.end(), values.begin(), values.end());
  }
  return out;
}

TEST(ApplyMeanUpdatesTest, AdamAndAdamWStepAsTorchsOwnAndAsTheirFormulas) {
  torch::NoGradGuard no_grad;
  std::mt19937 rng(17);
  const std::vector<int64_t> layers = {300, 41, 7};
  absl::StatusOr<FusionLayout> layout = FusionLayout::Create(layers, {{0, 200}, {200, 148}});
  ASSERT_TRUE(layout.ok());
  for (const char* spec : {"adam:beta1=0.8,beta2=0.99,eps=1e-6,weight_decay=0.05",
                           "adamw:beta1=0.9,beta2=0.95,eps=1e-8,weight_decay=0.1"}) {
    SCOPED_TRACE(spec);
    const bool decoupled = std::string(spec).rfind("adamw", 0) == 0;
    v1::RunConfig run;
    run.set_scheme("sketch_allreduce");
    run.set_learning_rate(0.01);
    run.set_optimizer(spec);
    run.set_momentum_at(kMomentumAtUpdate);  // Adam on the aggregated update
    Model mine = RandomModel(layers, 23);
    Model reference = Clone(mine);
    absl::StatusOr<std::unique_ptr<torch::optim::Optimizer>> optimizer = MakeOptimizer(run, mine.params);
    ASSERT_TRUE(optimizer.ok()) << optimizer.status();
    EXPECT_FALSE(StepsOnlyTheUpdatedCoordinates(**optimizer));
    std::unique_ptr<torch::optim::Optimizer> by_hand;
    const double beta1 = decoupled ? 0.9 : 0.8, beta2 = decoupled ? 0.95 : 0.99, eps = decoupled ? 1e-8 : 1e-6,
                 decay = decoupled ? 0.1 : 0.05;
    if (decoupled) {
      by_hand = std::make_unique<torch::optim::AdamW>(
          reference.params,
          torch::optim::AdamWOptions(0.01).betas(std::make_tuple(beta1, beta2)).eps(eps).weight_decay(decay));
    } else {
      by_hand = std::make_unique<torch::optim::Adam>(
          reference.params,
          torch::optim::AdamOptions(0.01).betas(std::make_tuple(beta1, beta2)).eps(eps).weight_decay(decay));
    }
    AdamReference formula{beta1, beta2, eps, decay, decoupled, Flat(mine), {}, {}};
    formula.m.assign(formula.p.size(), 0.0);
    formula.v.assign(formula.p.size(), 0.0);
    std::vector<float> buffer;
    for (int step = 0; step < 5; ++step) {
      const double rate = 0.01 * (step + 1);
      // Sparse steps leave most coordinates without a gradient: Adam still
      // moves them by their moments, as torch's does.
      const std::vector<Update> updates = RandomUpdates(*layout, 0.1, step == 2, rng);
      formula.Step(MeanGradient(updates, *layout, 3, mine), rate);
      ASSERT_TRUE(ApplyMeanUpdates(updates, *layout, 3, rate, mine.params, **optimizer, &buffer).ok());
      ReferenceStep(updates, *layout, 3, rate, 0, reference, *by_hand);
    }
    ExpectSameBits(mine, reference);
    const std::vector<double> got = Flat(mine);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], formula.p[i], 1e-5 * std::max(1.0, std::abs(formula.p[i]))) << "coordinate " << i;
    }
  }
}

// Adam's moments on the worker (momentum_at=worker): with every coordinate
// sent each step (the dense compressor, one worker, and three workers with
// the same gradients), the group's encoded directions applied by the run's
// optimizer are AdamW's step, against its formula in double precision.
TEST(ApplyMeanUpdatesTest, AdamAtTheWorkerWithEveryCoordinateSentIsAdamW) {
  torch::NoGradGuard no_grad;
  const std::vector<int64_t> layers = {300, 41, 7};
  absl::StatusOr<FusionLayout> layout = FusionLayout::Create(layers, {{0, 200}, {200, 148}});
  ASSERT_TRUE(layout.ok());
  v1::JobConfig job;
  job.set_world_size(3);
  v1::RunConfig& run = *job.mutable_run();
  run.set_scheme("topk_allgather");
  run.set_learning_rate(0.01);
  run.set_optimizer("adamw:beta1=0.9,beta2=0.95,eps=1e-08,weight_decay=0.1");
  run.set_momentum_at(kMomentumAtWorker);
  run.set_error_feedback(true);
  for (int g = 0; g < layout->num_groups(); ++g) {
    v1::GroupConfig* group = job.add_groups();
    group->set_group(g);
    group->set_dim(static_cast<uint64_t>(layout->group_size(g)));
    group->set_compressor("dense");
  }
  ASSERT_TRUE(KeepsAdamOnTheWorker(run));
  Model mine = RandomModel(layers, 29);
  absl::StatusOr<std::unique_ptr<torch::optim::Optimizer>> optimizer = MakeOptimizer(run, mine.params);
  ASSERT_TRUE(optimizer.ok()) << optimizer.status();
  EXPECT_FALSE(StepsOnlyTheUpdatedCoordinates(**optimizer)) << "the decay moves every coordinate";
  absl::StatusOr<GroupCompressors> groups = CompressorsFor(job);
  ASSERT_TRUE(groups.ok()) << groups.status();
  AdamReference formula{0.9, 0.95, 1e-8, 0.1, true, Flat(mine), {}, {}};
  formula.m.assign(formula.p.size(), 0.0);
  formula.v.assign(formula.p.size(), 0.0);
  std::mt19937 rng(31);
  std::vector<float> buffer;
  for (int step = 0; step < 6; ++step) {
    const double rate = 0.01 * (step + 1);
    // One gradient per group (dense), sent by each of three workers alike.
    const std::vector<Update> gradients = RandomUpdates(*layout, 1.0, true, rng);
    formula.Step(MeanGradient(gradients, *layout, 1, mine), rate);
    std::vector<Update> sums;
    for (int g = 0; g < layout->num_groups(); ++g) {
      absl::StatusOr<Payload> payload = groups->Encode(g, gradients[g].values, {static_cast<uint64_t>(step), {}});
      ASSERT_TRUE(payload.ok()) << payload.status();
      absl::StatusOr<Update> direction = groups->Decode(g, *payload);
      ASSERT_TRUE(direction.ok()) << direction.status();
      ASSERT_TRUE(groups->Settle(g, SettleAt(*direction)).ok());
      for (float& v : direction->values) v *= 3;  // the sum over three workers
      sums.push_back(*std::move(direction));
    }
    ASSERT_TRUE(ApplyMeanUpdates(sums, *layout, 3, rate, mine.params, **optimizer, &buffer).ok());
    for (int g = 0; g < layout->num_groups(); ++g) {
      for (float e : groups->residual(g)) ASSERT_EQ(e, 0.0f) << "all sent, nothing waits";
    }
  }
  const std::vector<double> got = Flat(mine);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], formula.p[i], 1e-5 * std::max(1.0, std::abs(formula.p[i]))) << "coordinate " << i;
  }
}

TEST(ApplyMeanUpdatesTest, TheRunsSgdKeepsMomentumOnlyWhereTheOptimizerHoldsIt) {
  v1::RunConfig run;
  run.set_learning_rate(0.05);
  run.set_momentum(0.9);
  std::vector<torch::Tensor> params = {torch::zeros({3})};
  run.set_scheme("dense_allreduce");
  absl::StatusOr<std::unique_ptr<torch::optim::Optimizer>> dense = MakeOptimizer(run, params);
  ASSERT_TRUE(dense.ok());
  EXPECT_FALSE(StepsOnlyTheUpdatedCoordinates(**dense)) << "dense: momentum in the optimizer";
  run.set_scheme("sketch_allreduce");
  absl::StatusOr<std::unique_ptr<torch::optim::Optimizer>> compressed = MakeOptimizer(run, params);
  ASSERT_TRUE(compressed.ok());
  EXPECT_TRUE(StepsOnlyTheUpdatedCoordinates(**compressed)) << "compressed: momentum on the worker";
  run.set_optimizer("adamw:beta1=2");
  EXPECT_EQ(MakeOptimizer(run, params).status().code(), absl::StatusCode::kInvalidArgument);
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
