// Adam's moments on the worker: the encoded direction against a double
// reference of Adam's over many sizes and steps; state restore; refusals.
#include "common/adam_moments.h"

#include <cmath>
#include <vector>

#include "common/compressor_registry.h"
#include "common/test_vectors.h"
#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

std::unique_ptr<AdamMoments> MakeDense(const AdamHyperparameters& adam) {
  return *WithAdamMoments(*CompressorRegistry::Default().Create("dense"), adam);
}

// Adam's direction in double: what torch::optim::Adam steps by, over the rate.
struct ReferenceAdam {
  AdamHyperparameters adam;
  std::vector<double> m, v;
  int t = 0;
  std::vector<double> Step(const std::vector<float>& g) {
    if (m.empty()) m.assign(g.size(), 0.0), v.assign(g.size(), 0.0);
    ++t;
    std::vector<double> d(g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      m[i] = adam.beta1 * m[i] + (1 - adam.beta1) * g[i];
      v[i] = adam.beta2 * v[i] + (1 - adam.beta2) * static_cast<double>(g[i]) * g[i];
      const double m_hat = m[i] / (1 - std::pow(adam.beta1, t));
      const double v_hat = v[i] / (1 - std::pow(adam.beta2, t));
      d[i] = m_hat / (std::sqrt(v_hat) + adam.eps);
    }
    return d;
  }
};

// Relative 1e-5 (a few float roundings of values of order 1), absolute 1e-6.
void ExpectNear(const std::vector<double>& want, absl::Span<const float> got, const std::string& where) {
  ASSERT_EQ(want.size(), got.size()) << where;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-6 + 1e-5 * std::fabs(want[i])) << where << " at " << i;
  }
}

TEST(AdamMomentsTest, EncodesAdamsDirectionOverManySizesAndSteps) {
  for (const AdamHyperparameters adam : {AdamHyperparameters{0.9, 0.999, 1e-8}, AdamHyperparameters{0.9, 0.95, 1e-8},
                                         AdamHyperparameters{0.0, 0.5, 1e-3}}) {
    for (size_t n : {1u, 2u, 7u, 64u, 1000u, 4099u}) {
      auto coder = MakeDense(adam);
      ReferenceAdam reference{adam};
      for (int step = 0; step < 12; ++step) {
        // Gradients of changing scale, some of them exactly 0.
        std::vector<float> g = GaussianVector(n, 100 * step + static_cast<uint32_t>(n), std::pow(3.0f, step % 4 - 2));
        for (size_t i = 0; i < n; i += 5) g[i] = 0.0f;
        absl::StatusOr<Payload> p = coder->Encode(g, {static_cast<uint64_t>(step), {}});
        ASSERT_TRUE(p.ok()) << p.status();
        absl::StatusOr<Update> u = coder->Decode(*p);
        ASSERT_TRUE(u.ok()) << u.status();
        ASSERT_TRUE(u->dense);
        const std::string where = "n=" + std::to_string(n) + " step " + std::to_string(step) + " beta2 " +
                                  std::to_string(adam.beta2);
        ExpectNear(reference.Step(g), u->values, where);
        ExpectNear(reference.m, coder->first_moment(), where + " (m)");
        ExpectNear(reference.v, coder->second_moment(), where + " (v)");
        EXPECT_EQ(coder->steps(), static_cast<uint64_t>(step + 1));
      }
    }
  }
}

TEST(AdamMomentsTest, KeepsTheMomentsWhereAnUpdateWasApplied) {
  auto coder = MakeDense({});
  const std::vector<float> g = GaussianVector(100, 1);
  ASSERT_TRUE(coder->Encode(g, {0, {}}).ok());
  const std::vector<float> m(coder->first_moment().begin(), coder->first_moment().end());
  Update applied;
  applied.dim = 100;
  applied.dense = true;
  applied.values.assign(100, 1.0f);
  ASSERT_TRUE(coder->OnApplied(applied).ok());
  EXPECT_EQ(std::vector<float>(coder->first_moment().begin(), coder->first_moment().end()), m);
}

TEST(AdamMomentsTest, ARestoredStateEncodesAsTheOriginalWould) {
  const AdamHyperparameters adam{0.9, 0.95, 1e-8};
  auto original = MakeDense(adam);
  for (int step = 0; step < 3; ++step) ASSERT_TRUE(original->Encode(GaussianVector(33, step), {0, {}}).ok());
  auto restored = MakeDense(adam);
  ASSERT_TRUE(restored->Restore(original->first_moment(), original->second_moment(), original->steps()).ok());
  const std::vector<float> g = GaussianVector(33, 7);
  absl::StatusOr<Payload> a = original->Encode(g, {3, {}});
  absl::StatusOr<Payload> b = restored->Encode(g, {3, {}});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(original->Decode(*a)->values, restored->Decode(*b)->values);
}

TEST(AdamMomentsTest, RefusesABadStateAndKeepsItsOwn) {
  auto coder = MakeDense({});
  ASSERT_TRUE(coder->Encode(GaussianVector(4, 1), {0, {}}).ok());
  const std::vector<float> m(coder->first_moment().begin(), coder->first_moment().end());
  const std::vector<float> four(4, 0.5f), three(3, 0.5f), negative{0.5f, -1.0f, 0.5f, 0.5f},
      not_finite{0.5f, NAN, 0.5f, 0.5f};
  EXPECT_EQ(coder->Restore(four, three, 2).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(coder->Restore(four, negative, 2).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(coder->Restore(not_finite, four, 2).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(coder->Restore(four, four, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(coder->Restore({}, {}, 3).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::vector<float>(coder->first_moment().begin(), coder->first_moment().end()), m);
  EXPECT_EQ(coder->steps(), 1u);
  // A group whose size changed is refused by name.
  absl::StatusOr<Payload> p = coder->Encode(GaussianVector(5, 1), {1, {}});
  EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(AdamMomentsTest, RefusesBadHyperparametersByName) {
  for (const AdamHyperparameters bad : {AdamHyperparameters{1.0, 0.9, 1e-8}, AdamHyperparameters{0.9, -0.1, 1e-8},
                                        AdamHyperparameters{0.9, 0.9, 0.0}, AdamHyperparameters{NAN, 0.9, 1e-8},
                                        AdamHyperparameters{0.9, 0.9, INFINITY}}) {
    absl::StatusOr<std::unique_ptr<AdamMoments>> made =
        WithAdamMoments(*CompressorRegistry::Default().Create("dense"), bad);
    ASSERT_FALSE(made.ok());
    EXPECT_EQ(made.status().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_NE(WithAdamMoments(*CompressorRegistry::Default().Create("dense"), {2.0, 0.9, 1e-8}).status().message().find(
                "beta1"),
            std::string::npos);
}

}  // namespace
}  // namespace sketchfuse
