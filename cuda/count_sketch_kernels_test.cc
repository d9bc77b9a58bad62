// GPU Count-Sketch against the CPU reference on random data of many sizes
// (1, sizes that are not multiples of the block size, large): identical
// buckets and signs, identical estimates from the same table, and inserted
// tables equal up to float rounding of the atomic additions (1e-5 of the
// cell's absolute mass, the sum of |x_i| hashed there). Skips without a GPU.
#include "cuda/count_sketch_kernels.h"

#include <cmath>
#include <algorithm>
#include <random>
#include <vector>

#include "common/count_sketch.h"
#include "common/sketch_hash.h"
#include "cuda/device_buffer.h"
#include "common/test_vectors.h"
#include "cuda/gpu_test_util.h"

namespace sketchfuse {
namespace {

class GpuSketchTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GpuSketchTest, HashesMatchCpuBitForBit) {
  SKIP_WITHOUT_GPU();
  const uint32_t n = GetParam();
  const SketchShape shape{5, 1000 + n % 997, 42};
  auto buckets = *DeviceBuffer<uint32_t>::Allocate(n);
  auto signs = *DeviceBuffer<float>::Allocate(n);
  for (uint32_t row = 0; row < shape.rows; ++row) {
    ASSERT_TRUE(LaunchSketchHashes(shape, row, n, buckets.data(), signs.data(), nullptr).ok());
    const std::vector<uint32_t> b = *buckets.ToHost();
    const std::vector<float> s = *signs.ToHost();
    const RowHash h = MakeRowHash(shape.seed, row);
    const uint32_t chunk_shift = ChunkShift(shape.cols);
    for (uint32_t i = 0; i < n; ++i) {
      ASSERT_EQ(b[i], BucketOfIndex(h, i, shape.cols, chunk_shift))
          << "row " << row << " index " << i;
      ASSERT_EQ(s[i], SignOfIndex(h, i));
    }
  }
}

TEST_P(GpuSketchTest, InsertMatchesCpuAndEstimatesAreIdentical) {
  SKIP_WITHOUT_GPU();
  const uint32_t n = GetParam();
  const SketchShape shape{5, std::max<uint32_t>(1, n / 20), 7};
  const std::vector<float> x = GaussianVector(n, n);
  CountSketch cpu = *CountSketch::Create(shape);
  ASSERT_TRUE(cpu.Insert(x).ok());

  auto d_x = *DeviceBuffer<float>::FromHost(x);
  auto d_table = *DeviceBuffer<float>::Allocate(shape.num_cells());
  ASSERT_TRUE(d_table.ZeroAsync(nullptr).ok());
  ASSERT_TRUE(LaunchCountSketchInsert(shape, d_x.data(), n, d_table.data(), nullptr).ok());
  const std::vector<float> gpu_table = *d_table.ToHost();
  // The absolute mass of each cell (sum of |x_i| over the coordinates hashed
  // there) bounds the rounding error of summing them in any order: with m
  // terms, (m - 1) * 2^-24 * mass. Cells here hold about 20 terms.
  std::vector<double> mass(shape.num_cells(), 0.0);
  for (uint32_t r = 0; r < shape.rows; ++r) {
    const RowHash h = MakeRowHash(shape.seed, r);
    for (uint32_t i = 0; i < n; ++i) {
      mass[static_cast<size_t>(r) * shape.cols +
           BucketOfIndex(h, i, shape.cols, ChunkShift(shape.cols))] += std::abs(x[i]);
    }
  }
  for (size_t c = 0; c < gpu_table.size(); ++c) {
    ASSERT_NEAR(gpu_table[c], cpu.table()[c], 1e-5 * mass[c] + 1e-30) << c;
  }

  // Estimates from the CPU's table, on the GPU: bit-identical.
  auto d_cpu_table = *DeviceBuffer<float>::FromHost(cpu.table());
  auto d_est = *DeviceBuffer<float>::Allocate(n);
  ASSERT_TRUE(LaunchCountSketchEstimate(shape, d_cpu_table.data(), n, d_est.data(), nullptr).ok());
  const std::vector<float> gpu_est = *d_est.ToHost();
  std::vector<float> cpu_est(n);
  cpu.view().EstimateAll(absl::MakeSpan(cpu_est));
  ASSERT_EQ(gpu_est, cpu_est);
}

INSTANTIATE_TEST_SUITE_P(Sizes, GpuSketchTest,
                         ::testing::Values(1u, 2u, 255u, 256u, 257u, 4099u, 100003u, 1u << 20));

// Wide sketches stage their cells in aligned 16-byte groups: a table and an
// input that start off a 16-byte boundary, and rows whose length is not a
// multiple of 4, must give the CPU's table and the CPU's estimates.
TEST(GpuSketchTest, WideSketchesAtEveryAlignment) {
  SKIP_WITHOUT_GPU();
  const uint32_t n = 300007;
  const std::vector<float> x = GaussianVector(n, 5);
  for (uint32_t rows : {1u, 2u, 5u, 7u}) {
    for (uint32_t shift : {0u, 1u, 2u, 3u}) {
      const SketchShape shape{rows, 3001 + shift, 77 + shift};
      SCOPED_TRACE(testing::Message() << "rows " << rows << " shift " << shift);
      CountSketch cpu = *CountSketch::Create(shape);
      ASSERT_TRUE(cpu.Insert(x).ok());
      std::vector<float> padded_x(shift, 0.0f);
      padded_x.insert(padded_x.end(), x.begin(), x.end());
      auto d_x = *DeviceBuffer<float>::FromHost(padded_x);
      auto d_table = *DeviceBuffer<float>::FromHost(std::vector<float>(shape.num_cells() + shift, 0.0f));
      ASSERT_TRUE(LaunchCountSketchInsert(shape, d_x.data() + shift, n, d_table.data() + shift,
                                          nullptr).ok());
      const std::vector<float> gpu_table = *d_table.ToHost();
      std::vector<double> mass(shape.num_cells(), 0.0);
      for (uint32_t r = 0; r < rows; ++r) {
        const RowHash h = MakeRowHash(shape.seed, r);
        for (uint32_t i = 0; i < n; ++i) {
          mass[static_cast<size_t>(r) * shape.cols +
               BucketOfIndex(h, i, shape.cols, ChunkShift(shape.cols))] += std::abs(x[i]);
        }
      }
      for (uint32_t c = 0; c < shift; ++c) ASSERT_EQ(gpu_table[c], 0.0f) << "before the table";
      for (size_t c = 0; c < shape.num_cells(); ++c) {
        ASSERT_NEAR(gpu_table[shift + c], cpu.table()[c], 1e-5 * mass[c] + 1e-30) << c;
      }
      // Estimates from the CPU's table placed off alignment: bit-identical.
      std::vector<float> padded_table(shift, 0.0f);
      padded_table.insert(padded_table.end(), cpu.table().begin(), cpu.table().end());
      auto d_cpu_table = *DeviceBuffer<float>::FromHost(padded_table);
      auto d_est = *DeviceBuffer<float>::Allocate(n);
      ASSERT_TRUE(LaunchCountSketchEstimate(shape, d_cpu_table.data() + shift, n, d_est.data(),
                                            nullptr).ok());
      std::vector<float> cpu_est(n);
      cpu.view().EstimateAll(absl::MakeSpan(cpu_est));
      ASSERT_EQ(*d_est.ToHost(), cpu_est);
    }
  }
}

// The sparse insert (a top-k selection into a peel sketch) against
// CountSketch::InsertEntries: equal up to the order of additions into cells
// that several entries share (1e-5 of the cell's absolute mass).
TEST(GpuSketchTest, SparseInsertMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (uint64_t count : {uint64_t{1}, uint64_t{255}, uint64_t{4097}, uint64_t{150001}}) {
    for (uint32_t rows : {2u, 4u, 7u}) {
      const uint64_t dim = count * 37 + 11;
      const SketchShape shape{rows, static_cast<uint32_t>(std::max<uint64_t>(1, count / 2)), 900 + rows};
      SCOPED_TRACE(testing::Message() << "count " << count << " rows " << rows);
      std::mt19937 rng(static_cast<uint32_t>(count + rows));
      std::vector<uint32_t> indices(dim);
      for (uint32_t i = 0; i < dim; ++i) indices[i] = i;
      std::shuffle(indices.begin(), indices.end(), rng);
      indices.resize(count);
      const std::vector<float> values = GaussianVector(count, rows);
      CountSketch cpu = *CountSketch::Create(shape);
      ASSERT_TRUE(cpu.InsertEntries(indices, values).ok());
      auto d_indices = *DeviceBuffer<uint32_t>::FromHost(indices);
      auto d_values = *DeviceBuffer<float>::FromHost(values);
      auto d_table = *DeviceBuffer<float>::FromHost(std::vector<float>(shape.num_cells(), 0.0f));
      ASSERT_TRUE(LaunchCountSketchInsertEntries(shape, d_indices.data(), d_values.data(), count, d_table.data(),
                                                 nullptr)
                      .ok());
      const std::vector<float> gpu_table = *d_table.ToHost();
      std::vector<double> mass(shape.num_cells(), 0.0);
      for (uint32_t r = 0; r < rows; ++r) {
        const RowHash h = MakeRowHash(shape.seed, r);
        for (uint64_t j = 0; j < count; ++j) {
          mass[static_cast<size_t>(r) * shape.cols + BucketOfIndex(h, indices[j], shape.cols, ChunkShift(shape.cols))] +=
              std::abs(values[j]);
        }
      }
      for (size_t c = 0; c < gpu_table.size(); ++c) {
        ASSERT_NEAR(gpu_table[c], cpu.table()[c], 1e-5 * mass[c] + 1e-30) << c;
      }
    }
  }
}

TEST(GpuSketchLauncherTest, RejectsBadShapesWithoutLaunching) {
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(LaunchCountSketchInsert({0, 10, 1}, nullptr, 10, nullptr, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LaunchSketchHashes({5, 10, 1}, 5, 10, nullptr, nullptr, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GpuSketchLauncherTest, EmptyInputsAreNoOps) {
  SKIP_WITHOUT_GPU();
  const SketchShape shape{3, 8, 1};
  auto table = *DeviceBuffer<float>::FromHost(std::vector<float>(shape.num_cells(), 1.5f));
  EXPECT_TRUE(LaunchCountSketchInsert(shape, nullptr, 0, table.data(), nullptr).ok());
  EXPECT_TRUE(LaunchCountSketchEstimate(shape, table.data(), 0, nullptr, nullptr).ok());
  EXPECT_TRUE(LaunchSketchHashes(shape, 0, 0, nullptr, nullptr, nullptr).ok());
  EXPECT_EQ(*table.ToHost(), std::vector<float>(shape.num_cells(), 1.5f));
}

}  // namespace
}  // namespace sketchfuse
