// The GPU peeling decoder against the CPU's (common/sketch_peeling.h) on the
// same tables: the same coordinates and the same values, bit for bit (no
// tolerance: both apply the same rules to the same floats in the same order).
// Tables are sums of several workers' sparse sketches, as a job's aggregate,
// over many group sizes, row counts and loads (nonzeros per cell, from easy to
// past the peel's capacity), with the options that end a decode early; plus
// the workspace's reuse across shapes, tables with NaN and infinity, and bad
// arguments. Skips without a GPU.
#include "cuda/peel_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/count_sketch.h"
#include "common/sketch_peeling.h"
#include "cuda/device_buffer.h"
#include "cuda/gpu_test_util.h"

namespace sketchfuse {
namespace {

// The summed sketch of `workers` vectors of `dim` elements, each with
// `nonzeros_each` random coordinates of heavy-tailed values (log-normal
// magnitudes, random signs), added worker by worker as a reduction would.
std::vector<float> WorkersTable(const SketchShape& shape, uint64_t dim, uint64_t nonzeros_each, int workers,
                                uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<uint64_t> pick(0, dim - 1);
  std::vector<float> sum(shape.num_cells(), 0.0f);
  for (int w = 0; w < workers; ++w) {
    std::vector<float> x(dim, 0.0f);
    for (uint64_t j = 0; j < nonzeros_each; ++j) {
      x[pick(rng)] = (normal(rng) > 0 ? 1.0f : -1.0f) * std::exp(normal(rng));
    }
    std::vector<float> table(shape.num_cells(), 0.0f);
    count_sketch_reference::Insert(shape, x, &table);
    for (size_t c = 0; c < sum.size(); ++c) sum[c] += table[c];
  }
  return sum;
}

struct Decoded {
  std::vector<uint32_t> indices;
  std::vector<float> values;
  uint32_t passes = 0;
  uint64_t ordered_subtractions = 0;
};

Decoded DecodeOnGpu(const SketchShape& shape, const std::vector<float>& table, uint64_t dim,
                    const PeelOptions& options, PeelWorkspace& workspace) {
  DeviceBuffer<float> d_table = *DeviceBuffer<float>::FromHost(table);
  absl::StatusOr<DevicePeelResult> result = PeelDecodeOnDevice(shape, d_table.data(), dim, options, workspace, nullptr);
  EXPECT_TRUE(result.ok()) << result.status();
  Decoded out;
  if (!result.ok()) return out;
  out.indices.resize(result->count);
  out.values.resize(result->count);
  if (result->count > 0) {
    EXPECT_EQ(cudaMemcpy(out.indices.data(), result->indices, result->count * sizeof(uint32_t),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(cudaMemcpy(out.values.data(), result->values, result->count * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
  }
  out.passes = result->passes;
  out.ordered_subtractions = result->ordered_subtractions;
  // The input table is left as it was.
  const std::vector<float> after = *d_table.ToHost();
  EXPECT_EQ(std::memcmp(after.data(), table.data(), table.size() * sizeof(float)), 0) << "the input table changed";
  return out;
}

// The GPU's result equals the CPU's: same indices, same value bits. The
// GPU's decode goes to *decoded when given.
void ExpectSameAsCpu(const SketchShape& shape, const std::vector<float>& table, uint64_t dim,
                     const PeelOptions& options, PeelWorkspace& workspace, const std::string& what,
                     Decoded* decoded = nullptr) {
  const SparseEntries cpu = PeelDecode(SketchView(shape, table.data()), dim, options);
  const Decoded gpu = DecodeOnGpu(shape, table, dim, options, workspace);
  if (decoded != nullptr) *decoded = gpu;
  ASSERT_EQ(gpu.indices.size(), cpu.indices.size()) << what;
  for (size_t j = 0; j < cpu.indices.size(); ++j) {
    ASSERT_EQ(gpu.indices[j], cpu.indices[j]) << what << ", entry " << j;
    uint32_t a, b;
    std::memcpy(&a, &gpu.values[j], 4);
    std::memcpy(&b, &cpu.values[j], 4);
    ASSERT_EQ(a, b) << what << ", coordinate " << cpu.indices[j] << ": " << gpu.values[j] << " vs "
                    << cpu.values[j];
  }
}

struct Case {
  uint64_t dim;
  uint32_t rows;
  double load;  // nonzeros (all workers) per cell
};

class GpuPeelParity : public ::testing::TestWithParam<Case> {};

TEST_P(GpuPeelParity, SameCoordinatesAndBitsAsCpu) {
  SKIP_WITHOUT_GPU();
  const Case c = GetParam();
  PeelWorkspace workspace;
  for (uint32_t seed : {1u, 2u}) {
    const uint32_t cols = static_cast<uint32_t>(std::max<uint64_t>(1, c.dim / 40));
    const SketchShape shape{c.rows, cols, 1000 + seed};
    const int workers = 4;
    const uint64_t each = std::max<uint64_t>(1, static_cast<uint64_t>(c.load * shape.num_cells() / workers));
    const std::vector<float> table = WorkersTable(shape, c.dim, each, workers, seed);
    ExpectSameAsCpu(shape, table, c.dim, PeelOptions{}, workspace,
                    "dim " + std::to_string(c.dim) + " rows " + std::to_string(c.rows) + " load " +
                        std::to_string(c.load) + " seed " + std::to_string(seed));
  }
}

INSTANTIATE_TEST_SUITE_P(
    SizesRowsLoads, GpuPeelParity,
    ::testing::Values(Case{1, 4, 0.25}, Case{7, 2, 0.25}, Case{1000, 4, 0.05}, Case{1000, 3, 0.25},
                      Case{4097, 4, 0.25}, Case{4097, 5, 0.34}, Case{65536, 4, 0.25}, Case{65536, 2, 0.25},
                      Case{65536, 8, 0.25}, Case{65536, 4, 0.6}, Case{65536, 4, 2.0}, Case{1 << 20, 4, 0.25},
                      Case{1 << 20, 6, 0.34}, Case{3000001, 4, 0.25}, Case{3000001, 4, 0.45}));

TEST(GpuPeel, SharedCellsAreSubtractedInTheCpusOrder) {
  SKIP_WITHOUT_GPU();
  // Loaded enough that coordinates taken in one pass share cells in rows
  // they do not claim: the ordered subtraction runs, and later passes still
  // agree with the CPU to the bit.
  PeelWorkspace workspace;
  const SketchShape shape{4, 2000, 11};
  const uint64_t dim = 200000;
  const std::vector<float> table = WorkersTable(shape, dim, 600, 4, 5);
  Decoded gpu;
  ExpectSameAsCpu(shape, table, dim, PeelOptions{}, workspace, "shared cells", &gpu);
  EXPECT_GT(gpu.ordered_subtractions, 0u);
  EXPECT_GT(gpu.passes, 2u);
}

TEST(GpuPeel, OptionsThatEndTheDecodeEarly) {
  SKIP_WITHOUT_GPU();
  PeelWorkspace workspace;
  const SketchShape shape{4, 4000, 3};
  const uint64_t dim = 300000;
  const std::vector<float> table = WorkersTable(shape, dim, 1200, 4, 9);
  for (uint64_t cap : {uint64_t{0}, uint64_t{1}, uint64_t{37}, uint64_t{1000}, uint64_t{4500}, shape.num_cells()}) {
    PeelOptions options;
    options.max_entries = cap;
    ExpectSameAsCpu(shape, table, dim, options, workspace, "max_entries " + std::to_string(cap));
  }
  for (uint32_t passes : {0u, 1u, 2u, 3u}) {
    PeelOptions options;
    options.max_passes = passes;
    ExpectSameAsCpu(shape, table, dim, options, workspace, "max_passes " + std::to_string(passes));
  }
  PeelOptions exact;
  exact.tolerance = 0;
  ExpectSameAsCpu(shape, table, dim, exact, workspace, "tolerance 0");
  PeelOptions no_floor;
  no_floor.floor = 0;
  ExpectSameAsCpu(shape, table, dim, no_floor, workspace, "floor 0");
}

TEST(GpuPeel, WorkspaceServesDecodesOfAnySize) {
  SKIP_WITHOUT_GPU();
  PeelWorkspace workspace;
  const struct {
    uint64_t dim;
    uint32_t rows, cols;
  } decodes[] = {{500000, 4, 12000}, {100, 3, 10}, {2000000, 4, 50000}, {1000, 2, 100}, {500000, 5, 3000}};
  uint32_t seed = 1;
  for (const auto& d : decodes) {
    const SketchShape shape{d.rows, d.cols, seed};
    const std::vector<float> table = WorkersTable(shape, d.dim, shape.num_cells() / 16, 4, seed++);
    ExpectSameAsCpu(shape, table, d.dim, PeelOptions{}, workspace, "decode of dim " + std::to_string(d.dim));
  }
}

TEST(GpuPeel, TablesWithZerosNanAndInfinity) {
  SKIP_WITHOUT_GPU();
  PeelWorkspace workspace;
  const SketchShape shape{4, 1000, 21};
  const uint64_t dim = 50000;
  ExpectSameAsCpu(shape, std::vector<float>(shape.num_cells(), 0.0f), dim, PeelOptions{}, workspace, "all zeros");
  std::vector<float> table = WorkersTable(shape, dim, 60, 4, 4);
  table[17] = std::numeric_limits<float>::quiet_NaN();
  table[1000 + 5] = -std::numeric_limits<float>::quiet_NaN();
  ExpectSameAsCpu(shape, table, dim, PeelOptions{}, workspace, "NaN cells");
  table[2000 + 9] = std::numeric_limits<float>::infinity();
  ExpectSameAsCpu(shape, table, dim, PeelOptions{}, workspace, "an infinite cell");
  std::vector<float> wide = WorkersTable(shape, dim, 60, 4, 8);
  for (size_t c = 0; c < wide.size(); c += 3) wide[c] *= 1e30f;
  ExpectSameAsCpu(shape, wide, dim, PeelOptions{}, workspace, "values 30 decades apart");
}

TEST(GpuPeel, RefusesBadArgumentsAndRecoversNothingFromOneRow) {
  SKIP_WITHOUT_GPU();
  PeelWorkspace workspace;
  DeviceBuffer<float> table = *DeviceBuffer<float>::FromHost(std::vector<float>(400, 1.0f));
  EXPECT_EQ(PeelDecodeOnDevice({0, 100, 1}, table.data(), 10, {}, workspace, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PeelDecodeOnDevice({4, 100, 1}, table.data(), uint64_t{1} << 32, {}, workspace, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PeelDecodeOnDevice({4, 100, 1}, nullptr, 10, {}, workspace, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<DevicePeelResult> one_row = PeelDecodeOnDevice({1, 400, 1}, table.data(), 1000, {}, workspace, nullptr);
  ASSERT_TRUE(one_row.ok()) << one_row.status();
  EXPECT_EQ(one_row->count, 0u);
}

}  // namespace
}  // namespace sketchfuse
