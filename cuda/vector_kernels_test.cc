// Sparse gather/scatter, the error-feedback update and layer packing on the
// GPU against plain CPU loops, on random data of many sizes. Gather, scatter-
// set, clear and packing only move values, so they must match bit for bit;
// the error-feedback update rounds its product and sum separately, like the
// CPU decorators, and must match within 1 ulp-scale relative tolerance
// (1e-6 of |m*u| + |g| + |e|). Skips without a GPU.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "common/model_profiles.h"
#include "common/test_vectors.h"
#include "cuda/device_buffer.h"
#include "cuda/error_feedback_kernels.h"
#include "cuda/finite_kernels.h"
#include "cuda/fusion_kernels.h"
#include "cuda/gpu_test_util.h"
#include "cuda/sparse_kernels.h"

namespace sketchfuse {
namespace {

// `count` distinct random indices below n, ascending.
std::vector<uint32_t> RandomIndices(uint32_t n, uint32_t count, uint32_t seed) {
  std::vector<uint32_t> all(n);
  std::iota(all.begin(), all.end(), 0u);
  std::shuffle(all.begin(), all.end(), std::mt19937(seed));
  all.resize(count);
  std::sort(all.begin(), all.end());
  return all;
}

class GpuVectorTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GpuVectorTest, GatherAndScattersMatchCpuLoops) {
  SKIP_WITHOUT_GPU();
  const uint32_t n = GetParam();
  const uint32_t count = std::max(1u, n / 7);
  const std::vector<float> dense = GaussianVector(n, n);
  const std::vector<uint32_t> indices = RandomIndices(n, count, n + 1);
  const std::vector<float> values = GaussianVector(count, n + 2);
  auto d_dense = *DeviceBuffer<float>::FromHost(dense);
  auto d_indices = *DeviceBuffer<uint32_t>::FromHost(indices);
  auto d_values = *DeviceBuffer<float>::FromHost(values);
  auto d_out = *DeviceBuffer<float>::Allocate(count);
  auto d_bad = *DeviceBuffer<uint32_t>::FromHost(std::vector<uint32_t>{0});

  ASSERT_TRUE(LaunchGather(d_dense.data(), n, d_indices.data(), count, d_out.data(), d_bad.data(),
                           nullptr)
                  .ok());
  const std::vector<float> gathered = *d_out.ToHost();
  for (uint32_t j = 0; j < count; ++j) ASSERT_EQ(gathered[j], dense[indices[j]]) << j;

  ASSERT_TRUE(LaunchScatterAdd(d_indices.data(), d_values.data(), count, d_dense.data(), n,
                               d_bad.data(), nullptr)
                  .ok());
  std::vector<float> expected = dense;
  for (uint32_t j = 0; j < count; ++j) expected[indices[j]] += values[j];
  ASSERT_EQ(*d_dense.ToHost(), expected);

  ASSERT_TRUE(LaunchScatterSet(d_indices.data(), d_values.data(), count, d_dense.data(), n,
                               d_bad.data(), nullptr)
                  .ok());
  for (uint32_t j = 0; j < count; ++j) expected[indices[j]] = values[j];
  ASSERT_EQ(*d_dense.ToHost(), expected);
  ASSERT_EQ((*d_bad.ToHost())[0], 0u);
}

TEST_P(GpuVectorTest, ErrorFeedbackKeepsWhatWasNotApplied) {
  SKIP_WITHOUT_GPU();
  const uint32_t n = GetParam();
  const float m = 0.9f;
  std::vector<float> velocity = GaussianVector(n, 3 * n);
  std::vector<float> residual = GaussianVector(n, 3 * n + 1);
  auto d_velocity = *DeviceBuffer<float>::FromHost(velocity);
  auto d_residual = *DeviceBuffer<float>::FromHost(residual);
  auto d_plain_residual = *DeviceBuffer<float>::FromHost(residual);
  std::vector<float> plain_residual = residual;
  for (int step = 0; step < 3; ++step) {
    const std::vector<float> grad = GaussianVector(n, 5 * n + step);
    auto d_grad = *DeviceBuffer<float>::FromHost(grad);
    ASSERT_TRUE(LaunchErrorFeedbackAccumulate(d_grad.data(), n, m, d_velocity.data(),
                                              d_residual.data(), nullptr)
                    .ok());
    ASSERT_TRUE(LaunchErrorFeedbackAccumulate(d_grad.data(), n, m, nullptr,
                                              d_plain_residual.data(), nullptr)
                    .ok());
    std::vector<float> bound(n);
    for (uint32_t i = 0; i < n; ++i) {
      const float product = m * velocity[i];
      velocity[i] = product + grad[i];
      bound[i] = 1e-6f * (std::abs(product) + std::abs(grad[i]) + std::abs(residual[i]));
      residual[i] += velocity[i];
      plain_residual[i] += grad[i];
    }
    const std::vector<float> got_u = *d_velocity.ToHost();
    const std::vector<float> got_e = *d_residual.ToHost();
    const std::vector<float> got_plain = *d_plain_residual.ToHost();
    for (uint32_t i = 0; i < n; ++i) {
      ASSERT_NEAR(got_u[i], velocity[i], bound[i]) << i;
      ASSERT_NEAR(got_e[i], residual[i], 2 * bound[i] + 1e-6f * std::abs(residual[i])) << i;
      ASSERT_EQ(got_plain[i], plain_residual[i]) << i;  // one rounding: exact
    }
    velocity = got_u;  // continue from the GPU's state so errors do not compound
    residual = got_e;

    const std::vector<uint32_t> applied = RandomIndices(n, std::max(1u, n / 10), n + step);
    auto d_applied = *DeviceBuffer<uint32_t>::FromHost(applied);
    ASSERT_TRUE(LaunchClearApplied(d_applied.data(), applied.size(), n, d_residual.data(),
                                   d_velocity.data(), nullptr)
                    .ok());
    for (uint32_t i : applied) velocity[i] = residual[i] = 0.0f;
    ASSERT_EQ(*d_velocity.ToHost(), velocity);
    ASSERT_EQ(*d_residual.ToHost(), residual);
  }
}

// A capped release keeps kept * e at the released coordinates (0 + kept * e,
// each rounded: bit for bit the host's) and zeroes the velocity there; the
// squared norm is the host's double sum within 1e-12 of it (another order).
TEST_P(GpuVectorTest, CappedReleaseAndSquaredNormMatchCpuLoops) {
  SKIP_WITHOUT_GPU();
  const uint32_t n = GetParam();
  std::vector<float> residual = GaussianVector(n, 7 * n);
  std::vector<float> velocity = GaussianVector(n, 7 * n + 1);
  auto d_residual = *DeviceBuffer<float>::FromHost(residual);
  auto d_velocity = *DeviceBuffer<float>::FromHost(velocity);
  const std::vector<uint32_t> released = RandomIndices(n, std::max(1u, n / 9), n + 5);
  auto d_released = *DeviceBuffer<uint32_t>::FromHost(released);
  const float kept = 1 - 0.3719f;
  ASSERT_TRUE(LaunchKeepApplied(d_released.data(), released.size(), n, kept, d_residual.data(), d_velocity.data(),
                                nullptr)
                  .ok());
  for (uint32_t i : released) {
    const float unsent = kept * residual[i];
    residual[i] = 0.0f;
    residual[i] += unsent;
    velocity[i] = 0.0f;
  }
  ASSERT_EQ(*d_residual.ToHost(), residual);
  ASSERT_EQ(*d_velocity.ToHost(), velocity);

  auto d_norm = *DeviceBuffer<double>::Allocate(1);
  ASSERT_TRUE(LaunchSquaredNorm(d_velocity.data(), n, d_norm.data(), nullptr).ok());
  double want = 0;
  for (float v : velocity) want += static_cast<double>(v) * v;
  EXPECT_NEAR((*d_norm.ToHost())[0], want, 1e-12 * want);
}

// The residual's rescale (the learning rate changed): one rounded product
// per element, bit for bit the host loop's, for factors below and above 1.
TEST_P(GpuVectorTest, RescaleMatchesCpuLoop) {
  SKIP_WITHOUT_GPU();
  const uint32_t n = GetParam();
  for (const float factor : {0.25f, 0.9655172f, 4.0f / 3.0f}) {
    std::vector<float> residual = GaussianVector(n, 13 * n);
    auto d_residual = *DeviceBuffer<float>::FromHost(residual);
    ASSERT_TRUE(LaunchScale(d_residual.data(), n, factor, nullptr).ok());
    for (float& e : residual) e *= factor;
    ASSERT_EQ(*d_residual.ToHost(), residual) << "factor " << factor;
  }
}

// The first non-finite element against a loop: none, one NaN, an infinity
// before a NaN, and every element non-finite.
TEST_P(GpuVectorTest, FirstNonFiniteMatchesCpuLoop) {
  SKIP_WITHOUT_GPU();
  const uint32_t n = GetParam();
  auto d_first = *DeviceBuffer<unsigned long long>::Allocate(1);
  auto first_of = [&](const std::vector<float>& x) {
    auto d_x = *DeviceBuffer<float>::FromHost(x);
    EXPECT_TRUE(LaunchFirstNonFinite(d_x.data(), x.size(), d_first.data(), nullptr).ok());
    return (*d_first.ToHost())[0];
  };
  std::vector<float> x = GaussianVector(n, 11 * n);
  EXPECT_EQ(first_of(x), ~0ull);
  const uint32_t late = n - 1 - (n / 3);
  x[late] = std::nanf("");
  EXPECT_EQ(first_of(x), late);
  const uint32_t early = n / 7;
  x[early] = early == late ? x[early] : -std::numeric_limits<float>::infinity();
  EXPECT_EQ(first_of(x), std::min(early, late));
  EXPECT_EQ(first_of(std::vector<float>(n, std::numeric_limits<float>::infinity())), 0ull);
}

INSTANTIATE_TEST_SUITE_P(Sizes, GpuVectorTest,
                         ::testing::Values(1u, 2u, 255u, 256u, 257u, 4099u, 100003u, 1u << 20));

TEST(GpuSparseTest, OutOfRangeIndicesAreCountedNotWritten) {
  SKIP_WITHOUT_GPU();
  auto d_dense = *DeviceBuffer<float>::FromHost(std::vector<float>{1, 2, 3});
  auto d_indices = *DeviceBuffer<uint32_t>::FromHost(std::vector<uint32_t>{1, 3, 1000});
  auto d_values = *DeviceBuffer<float>::FromHost(std::vector<float>{10, 20, 30});
  auto d_bad = *DeviceBuffer<uint32_t>::FromHost(std::vector<uint32_t>{0});
  ASSERT_TRUE(LaunchScatterSet(d_indices.data(), d_values.data(), 3, d_dense.data(), 3,
                               d_bad.data(), nullptr)
                  .ok());
  EXPECT_EQ(*d_dense.ToHost(), (std::vector<float>{1, 10, 3}));
  EXPECT_EQ((*d_bad.ToHost())[0], 2u);
  EXPECT_EQ(LaunchGather(nullptr, 3, d_indices.data(), 3, d_values.data(), nullptr, nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GpuVectorEdgeTest, EmptyInputsAreNoOps) {
  SKIP_WITHOUT_GPU();
  auto d = *DeviceBuffer<float>::FromHost(std::vector<float>{4, 5});
  EXPECT_TRUE(LaunchGather(d.data(), 2, nullptr, 0, nullptr, nullptr, nullptr).ok());
  EXPECT_TRUE(LaunchScatterAdd(nullptr, nullptr, 0, d.data(), 2, nullptr, nullptr).ok());
  EXPECT_TRUE(LaunchScatterSet(nullptr, nullptr, 0, d.data(), 2, nullptr, nullptr).ok());
  EXPECT_TRUE(LaunchErrorFeedbackAccumulate(nullptr, 0, 0.9f, nullptr, nullptr, nullptr).ok());
  EXPECT_TRUE(LaunchClearApplied(nullptr, 0, 2, d.data(), nullptr, nullptr).ok());
  EXPECT_EQ(*d.ToHost(), (std::vector<float>{4, 5}));
}

TEST(GpuErrorFeedbackTest, RefusesMomentumOutsideItsRange) {
  SKIP_WITHOUT_GPU();
  auto d = *DeviceBuffer<float>::Allocate(4);
  EXPECT_EQ(LaunchErrorFeedbackAccumulate(d.data(), 4, 1.0f, d.data(), d.data(), nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      LaunchErrorFeedbackAccumulate(d.data(), 4, std::nanf(""), d.data(), d.data(), nullptr)
          .code(),
      absl::StatusCode::kInvalidArgument);
}

// Packs a model's layers (real layer sizes, plus empty and tiny layers) into
// one fused buffer and back.
void CheckPackRoundTrip(const std::vector<uint64_t>& sizes) {
  std::vector<DeviceBuffer<float>> layers;
  std::vector<LayerSlice> slices;
  std::vector<float> expected_fused;
  uint32_t seed = 1;
  for (uint64_t size : sizes) {
    const std::vector<float> host = GaussianVector(size, seed++);
    expected_fused.insert(expected_fused.end(), host.begin(), host.end());
    layers.push_back(*DeviceBuffer<float>::FromHost(host));
    slices.push_back({layers.back().data(), size});
  }
  FusionLayout layout = *FusionLayout::Create(slices);
  ASSERT_EQ(layout.fused_size(), expected_fused.size());
  auto d_fused = *DeviceBuffer<float>::FromHost(
      std::vector<float>(expected_fused.size(), std::nanf("")));
  ASSERT_TRUE(layout.Pack(d_fused.data(), nullptr).ok());
  ASSERT_EQ(*d_fused.ToHost(), expected_fused);

  // Unpack a different fused vector and check every layer received its part.
  const std::vector<float> update = GaussianVector(expected_fused.size(), 99);
  auto d_update = *DeviceBuffer<float>::FromHost(update);
  ASSERT_TRUE(layout.Unpack(d_update.data(), nullptr).ok());
  uint64_t offset = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    const std::vector<float> got = *layers[l].ToHost();
    ASSERT_TRUE(std::equal(got.begin(), got.end(), update.begin() + offset)) << "layer " << l;
    offset += sizes[l];
  }
}

TEST(GpuFusionTest, PacksResNet50LayersAndBack) {
  SKIP_WITHOUT_GPU();
  std::vector<uint64_t> sizes;
  for (const TensorSpec& t : ResNet50Profile().BackwardOrder()) sizes.push_back(t.num_elements);
  CheckPackRoundTrip(sizes);
}

TEST(GpuFusionTest, PacksOddAndEmptyLayers) {
  SKIP_WITHOUT_GPU();
  CheckPackRoundTrip({1});
  CheckPackRoundTrip({0, 3, 0, 16385, 1, 0, 16384, 7});
  std::mt19937 rng(5);
  std::vector<uint64_t> sizes(300);
  for (uint64_t& s : sizes) s = rng() % 40000;
  CheckPackRoundTrip(sizes);
}

TEST(GpuFusionTest, RefusesBadLayouts) {
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(FusionLayout::Create({}).status().code(), absl::StatusCode::kInvalidArgument);
  const LayerSlice null_layer{nullptr, 5};
  EXPECT_EQ(FusionLayout::Create({&null_layer, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sketchfuse
