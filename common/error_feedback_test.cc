// Error feedback conserves every gradient: released + residual == sum of
// inputs, for every compressor; momentum masking; refusal of bad updates.
#include "common/error_feedback.h"

#include <cmath>
#include <random>
#include <vector>

#include "common/compressor_registry.h"
#include "common/test_vectors.h"
#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

std::unique_ptr<Compressor> Make(absl::string_view spec) {
  return *CompressorRegistry::Default().Create(spec);
}

class ConservationTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ConservationTest, ReleasedPlusResidualEqualsSumOfGradients) {
  const size_t n = 20011;
  auto ef = std::make_unique<ErrorFeedback>(Make(GetParam()));
  ErrorFeedback* raw = ef.get();
  const bool exact_values = GetParam().rfind("count_sketch", 0) != 0;
  std::vector<double> inputs(n, 0.0), released(n, 0.0);
  const std::vector<float> w = GaussianVector(n, 999);
  for (int step = 0; step < 20; ++step) {
    const std::vector<float> g = GaussianVector(n, step);
    for (size_t i = 0; i < n; ++i) inputs[i] += g[i];
    absl::StatusOr<Payload> p = ef->Encode(g, {static_cast<uint64_t>(step), w});
    ASSERT_TRUE(p.ok()) << p.status();
    absl::StatusOr<Update> u = ef->Decode(*p);
    ASSERT_TRUE(u.ok()) << u.status();
    // What the worker gives up: its residual at the applied coordinates.
    if (u->dense) {
      for (size_t i = 0; i < n; ++i) {
        released[i] += raw->residual()[i];
        EXPECT_EQ(u->values[i], raw->residual()[i]);
      }
    } else {
      for (size_t j = 0; j < u->indices.size(); ++j) {
        released[u->indices[j]] += raw->residual()[u->indices[j]];
        // Exact compressors apply exactly the residual values they release.
        if (exact_values) {
          EXPECT_EQ(u->values[j], raw->residual()[u->indices[j]]);
        }
      }
    }
    ASSERT_TRUE(ef->OnApplied(*u).ok());
  }
  for (size_t i = 0; i < n; ++i) {
    ASSERT_NEAR(released[i] + raw->residual()[i], inputs[i], 1e-4 * (1 + std::abs(inputs[i])))
        << "coordinate " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryCompressor, ConservationTest,
                         ::testing::Values("dense", "topk:density=0.01", "randomk:density=0.01",
                                           "threshold:density=0.01", "importance:density=0.01",
                                           "count_sketch:density=0.01"));

TEST(ErrorFeedbackTest, ResidualAccumulatesWhatWasNotSent) {
  ErrorFeedback ef(Make("topk:k=1"));
  std::vector<float> g = {1.0f, 3.0f, 2.0f};
  Update u = *ef.Decode(*ef.Encode(g, {}));
  EXPECT_EQ(u.indices, std::vector<uint32_t>{1});
  ASSERT_TRUE(ef.OnApplied(u).ok());
  EXPECT_EQ(std::vector<float>(ef.residual().begin(), ef.residual().end()),
            (std::vector<float>{1.0f, 0.0f, 2.0f}));
  // Next step: residual 2 + 1.5 = 3.5 wins over 1 + 1.
  g = {1.0f, 0.0f, 1.5f};
  u = *ef.Decode(*ef.Encode(g, {}));
  EXPECT_EQ(u.indices, std::vector<uint32_t>{2});
  EXPECT_EQ(u.values, std::vector<float>{3.5f});
}

TEST(ErrorFeedbackTest, RefusesBadUpdatesAndResizedGroupsWithoutChangingState) {
  ErrorFeedback ef(Make("topk:k=1"));
  ASSERT_TRUE(ef.Encode(std::vector<float>{1, 2, 3}, {}).ok());
  const std::vector<float> before(ef.residual().begin(), ef.residual().end());
  Update bad;
  bad.dim = 3;
  bad.indices = {1, 7};
  bad.values = {0, 0};
  absl::Status s = ef.OnApplied(bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("indices[1] = 7"), std::string::npos) << s;
  bad.indices = {2, 1};
  EXPECT_EQ(ef.OnApplied(bad).code(), absl::StatusCode::kInvalidArgument);
  bad.dim = 4;
  EXPECT_EQ(ef.OnApplied(bad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::vector<float>(ef.residual().begin(), ef.residual().end()), before);
  EXPECT_EQ(ef.Encode(std::vector<float>{1, 2}, {}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::vector<float>(ef.residual().begin(), ef.residual().end()), before);
}

TEST(ErrorFeedbackTest, AddBackReturnsValuesToTheResidualAndRefusesMisfits) {
  ErrorFeedback ef(Make("topk:k=1"));
  ASSERT_TRUE(ef.Encode(std::vector<float>{1, 2, 3}, {}).ok());
  Update sparse;
  sparse.dim = 3;
  sparse.indices = {0, 2};
  sparse.values = {0.5f, -3.0f};
  ASSERT_TRUE(ef.AddBack(sparse).ok());
  EXPECT_EQ(std::vector<float>(ef.residual().begin(), ef.residual().end()), (std::vector<float>{1.5f, 2, 0}));
  Update dense;
  dense.dense = true;
  dense.dim = 3;
  dense.values = {1, 1, 1};
  ASSERT_TRUE(ef.AddBack(dense).ok());
  EXPECT_EQ(std::vector<float>(ef.residual().begin(), ef.residual().end()), (std::vector<float>{2.5f, 3, 1}));
  sparse.indices = {2, 0};  // not ascending
  EXPECT_EQ(ef.AddBack(sparse).code(), absl::StatusCode::kInvalidArgument);
  dense.values.pop_back();
  EXPECT_EQ(ef.AddBack(dense).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::vector<float>(ef.residual().begin(), ef.residual().end()), (std::vector<float>{2.5f, 3, 1}));
}

TEST(MomentumTest, MaskVelocityZeroesOnlyTheMask) {
  absl::StatusOr<std::unique_ptr<Compressor>> c = WithMomentum(WithErrorFeedback(Make("topk:k=1")), 0.5);
  ASSERT_TRUE(c.ok());
  auto* m = static_cast<Momentum*>(c->get());
  auto* ef = static_cast<ErrorFeedback*>(m->inner());
  ASSERT_TRUE(m->Encode(std::vector<float>{1.0f, 4.0f}, {}).ok());
  Coordinates mask;
  mask.dim = 2;
  mask.indices = {1};
  ASSERT_TRUE(m->MaskVelocity(mask).ok());
  EXPECT_EQ(std::vector<float>(m->velocity().begin(), m->velocity().end()), (std::vector<float>{1.0f, 0.0f}));
  // The residual is the error feedback's to release, untouched here.
  EXPECT_EQ(std::vector<float>(ef->residual().begin(), ef->residual().end()), (std::vector<float>{1.0f, 4.0f}));
  mask.dim = 3;
  EXPECT_EQ(m->MaskVelocity(mask).code(), absl::StatusCode::kInvalidArgument);
  // Release zeroes the residual only; all coordinates at once.
  ASSERT_TRUE(ef->Release(Coordinates::All(2)).ok());
  EXPECT_EQ(std::vector<float>(ef->residual().begin(), ef->residual().end()), (std::vector<float>{0.0f, 0.0f}));
  Coordinates unordered;
  unordered.dim = 2;
  unordered.indices = {1, 0};
  EXPECT_EQ(ef->Release(unordered).code(), absl::StatusCode::kInvalidArgument);
}

TEST(MomentumTest, AccumulatesAndMasksAppliedCoordinates) {
  absl::StatusOr<std::unique_ptr<Compressor>> c = WithMomentum(Make("topk:k=1"), 0.5);
  ASSERT_TRUE(c.ok());
  auto* m = static_cast<Momentum*>(c->get());
  Update u = *m->Decode(*m->Encode(std::vector<float>{1.0f, 4.0f}, {}));
  ASSERT_TRUE(m->OnApplied(u).ok());
  EXPECT_EQ(std::vector<float>(m->velocity().begin(), m->velocity().end()),
            (std::vector<float>{1.0f, 0.0f}));
  Payload p = *m->Encode(std::vector<float>{2.0f, 2.0f}, {});
  // u = 0.5 * [1, 0] + [2, 2] = [2.5, 2]
  EXPECT_EQ(p.indices, std::vector<uint32_t>{0});
  EXPECT_EQ(p.values, std::vector<float>{2.5f});
  EXPECT_EQ(WithMomentum(Make("dense"), 1.0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WithMomentum(Make("dense"), -0.1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m->spec(), "momentum(0.5, topk:k=1)");
}

TEST(MomentumTest, ComposesWithErrorFeedback) {
  std::unique_ptr<Compressor> c = *WithMomentum(WithErrorFeedback(Make("dense")), 0.9);
  EXPECT_EQ(c->spec(), "momentum(0.9, ef(dense))");
  EXPECT_TRUE(c->linear());
  Update u = *c->Decode(*c->Encode(std::vector<float>{1, 2}, {}));
  EXPECT_TRUE(u.dense);
  EXPECT_TRUE(c->OnApplied(u).ok());
}

}  // namespace
}  // namespace sketchfuse
