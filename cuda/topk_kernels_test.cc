// GPU top-k and sketch heavy hitters against the CPU reference, on random
// data of many sizes (empty, 1, sizes that are not multiples of a warp or a
// block, millions), with ties, zeros and non-finite values. The index sets
// must be identical (ties broken by the smaller index, as common/topk.h
// documents) and every value bit-identical: the GPU only selects and copies.
// Outputs are poisoned first, so an unwritten entry fails. Skips without a GPU.
#include "cuda/topk_kernels.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/count_sketch.h"
#include "common/test_vectors.h"
#include "common/topk.h"
#include "cuda/device_buffer.h"
#include "cuda/gpu_test_util.h"

namespace sketchfuse {
namespace {

constexpr uint32_t kPoisonIndex = 0xDEADBEEFu;

struct Selection {
  std::vector<uint32_t> indices;
  std::vector<float> values;
};

// Bitwise float comparison (NaN == NaN when the bits agree).
bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

Selection GpuTopK(const std::vector<float>& x, uint64_t k, TopKWorkspace& workspace) {
  const uint64_t selected = std::min<uint64_t>(k, x.size());
  auto d_x = *DeviceBuffer<float>::FromHost(x);
  auto d_indices = *DeviceBuffer<uint32_t>::FromHost(std::vector<uint32_t>(selected, kPoisonIndex));
  auto d_values = *DeviceBuffer<float>::FromHost(
      std::vector<float>(selected, std::numeric_limits<float>::quiet_NaN()));
  const absl::Status status =
      LaunchTopK(d_x.data(), x.size(), k, workspace, d_indices.data(), d_values.data(), nullptr);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return {*d_indices.ToHost(), *d_values.ToHost()};
}

void ExpectMatchesReference(const std::vector<float>& x, uint64_t k, TopKWorkspace& workspace,
                            const std::string& what) {
  const Selection gpu = GpuTopK(x, k, workspace);
  const std::vector<uint32_t> expected = TopKIndicesReference(x, k);
  ASSERT_EQ(gpu.indices, expected) << what << " n=" << x.size() << " k=" << k;
  for (size_t j = 0; j < expected.size(); ++j) {
    ASSERT_TRUE(SameBits(gpu.values[j], x[expected[j]])) << what << " value " << j;
  }
}

std::vector<uint64_t> KsFor(uint64_t n) {
  return {1, 7, n / 1000 + 1, n / 2, n > 0 ? n - 1 : 0, n, n + 5};
}

class GpuTopKTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GpuTopKTest, GaussianMatchesReference) {
  SKIP_WITHOUT_GPU();
  const uint32_t n = GetParam();
  TopKWorkspace workspace = *TopKWorkspace::Create(n, false);
  const std::vector<float> x = GaussianVector(n, 1000 + n);
  for (uint64_t k : KsFor(n)) ExpectMatchesReference(x, k, workspace, "gaussian");
}

TEST_P(GpuTopKTest, ManyTiesAreBrokenBySmallerIndex) {
  SKIP_WITHOUT_GPU();
  const uint32_t n = GetParam();
  TopKWorkspace workspace = *TopKWorkspace::Create(n, false);
  std::mt19937 rng(n);
  std::uniform_int_distribution<int> level(-3, 3);
  std::vector<float> x(n);
  for (float& v : x) v = static_cast<float>(level(rng)) * 0.5f;  // -0 and +0 tie
  for (uint64_t k : KsFor(n)) ExpectMatchesReference(x, k, workspace, "ties");
}

TEST_P(GpuTopKTest, AllZerosSelectsTheFirstIndices) {
  SKIP_WITHOUT_GPU();
  const uint32_t n = GetParam();
  TopKWorkspace workspace = *TopKWorkspace::Create(n, false);
  const std::vector<float> x(n, 0.0f);
  for (uint64_t k : {uint64_t{1}, uint64_t{n / 3 + 1}}) {
    ExpectMatchesReference(x, k, workspace, "zeros");
  }
}

TEST_P(GpuTopKTest, NonFiniteValuesRankFirst) {
  SKIP_WITHOUT_GPU();
  const uint32_t n = GetParam();
  TopKWorkspace workspace = *TopKWorkspace::Create(n, false);
  std::vector<float> x = GaussianVector(n, 7 * n + 1);
  x[n / 2] = std::numeric_limits<float>::infinity();
  x[n - 1] = -std::numeric_limits<float>::infinity();
  x[n / 3] = std::numeric_limits<float>::quiet_NaN();
  x[0] = -std::numeric_limits<float>::max();
  for (uint64_t k : KsFor(n)) ExpectMatchesReference(x, k, workspace, "non-finite");
}

INSTANTIATE_TEST_SUITE_P(Sizes, GpuTopKTest,
                         ::testing::Values(1u, 2u, 31u, 32u, 33u, 1000u, 4099u, 100003u,
                                           1u << 20, 3000017u));

TEST(GpuTopKEdgeTest, EmptyInputAndZeroKWriteNothing) {
  SKIP_WITHOUT_GPU();
  TopKWorkspace workspace = *TopKWorkspace::Create(16, false);
  EXPECT_TRUE(LaunchTopK(nullptr, 0, 5, workspace, nullptr, nullptr, nullptr).ok());
  auto d_x = *DeviceBuffer<float>::FromHost(GaussianVector(16, 3));
  EXPECT_TRUE(LaunchTopK(d_x.data(), 16, 0, workspace, nullptr, nullptr, nullptr).ok());
}

TEST(GpuTopKEdgeTest, RefusesInputsLargerThanTheWorkspace) {
  SKIP_WITHOUT_GPU();
  TopKWorkspace workspace = *TopKWorkspace::Create(16, false);
  const absl::Status status = LaunchTopK(nullptr, 17, 5, workspace, nullptr, nullptr, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("workspace for 16"), std::string::npos) << status;
  EXPECT_EQ(TopKWorkspace::Create(1ull << 32, false).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GpuTopKEdgeTest, WorkspaceIsReusableAcrossSizes) {
  SKIP_WITHOUT_GPU();
  TopKWorkspace workspace = *TopKWorkspace::Create(50000, false);
  for (uint32_t n : {50000u, 17u, 40000u, 1u}) {
    ExpectMatchesReference(GaussianVector(n, n), n / 10 + 1, workspace, "reuse");
  }
}

// Heavy hitters: the estimate is bit-identical to the CPU's, so the selection
// must equal SketchView::HeavyHitters exactly.
struct SketchCase {
  uint32_t dim;
  uint32_t rows;
  uint32_t cols;
};

class GpuHeavyHittersTest : public ::testing::TestWithParam<SketchCase> {};

TEST_P(GpuHeavyHittersTest, MatchesCpuHeavyHitters) {
  SKIP_WITHOUT_GPU();
  const SketchCase c = GetParam();
  const SketchShape shape{c.rows, c.cols, 1234u + c.dim};
  std::vector<float> x = GaussianVector(c.dim, c.dim + c.rows);
  std::mt19937 rng(c.dim);
  for (int planted = 0; planted < 20; ++planted) x[rng() % c.dim] = (planted % 2 ? 50.f : -50.f);
  CountSketch cpu = *CountSketch::Create(shape);
  ASSERT_TRUE(cpu.Insert(x).ok());
  auto d_table = *DeviceBuffer<float>::FromHost(cpu.table());
  TopKWorkspace workspace = *TopKWorkspace::Create(c.dim, true);
  for (uint64_t k : {uint64_t{1}, uint64_t{c.dim / 100 + 1}, uint64_t{c.dim / 10 + 3},
                     uint64_t{c.dim}}) {
    const uint64_t selected = std::min<uint64_t>(k, c.dim);
    auto d_indices =
        *DeviceBuffer<uint32_t>::FromHost(std::vector<uint32_t>(selected, kPoisonIndex));
    auto d_values = *DeviceBuffer<float>::Allocate(selected);
    ASSERT_TRUE(LaunchSketchHeavyHitters(shape, d_table.data(), c.dim, k, workspace,
                                         d_indices.data(), d_values.data(), nullptr)
                    .ok());
    const SparseEntries expected = cpu.view().HeavyHitters(c.dim, k);
    ASSERT_EQ(*d_indices.ToHost(), expected.indices) << "dim " << c.dim << " k " << k;
    const std::vector<float> values = *d_values.ToHost();
    for (size_t j = 0; j < values.size(); ++j) {
      ASSERT_TRUE(SameBits(values[j], expected.values[j])) << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuHeavyHittersTest,
                         ::testing::Values(SketchCase{1, 1, 1}, SketchCase{257, 3, 50},
                                           SketchCase{4099, 5, 300}, SketchCase{100003, 4, 5000},
                                           SketchCase{1u << 20, 5, 20000},
                                           SketchCase{3000017, 1, 150000},
                                           // More wide sketches (chunks of 1024, rows
                                           // not a multiple of 4 long) and exactly one
                                           // chunk.
                                           SketchCase{200003, 7, 3001}, SketchCase{50000, 2, 1024},
                                           SketchCase{70001, 3, 1025}, SketchCase{1024, 5, 1024}));

TEST(GpuHeavyHittersEdgeTest, NeedsASketchWorkspace) {
  SKIP_WITHOUT_GPU();
  TopKWorkspace plain = *TopKWorkspace::Create(100, false);
  const absl::Status status =
      LaunchSketchHeavyHitters({5, 10, 1}, nullptr, 100, 5, plain, nullptr, nullptr, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_EQ(LaunchSketchHeavyHitters({0, 10, 1}, nullptr, 100, 5, plain, nullptr, nullptr,
                                     nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sketchfuse
