#include "common/peel_capacity.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

TEST(PeelCapacityTest, TheRuleAllotsFourCellsPerNonzero) {
  EXPECT_EQ(PeelColsFor(4, 1000), 1000u);
  EXPECT_EQ(PeelColsFor(8, 1000), 500u);
  EXPECT_EQ(PeelColsFor(3, 1000), 1334u);  // ceil(4000 / 3)
  EXPECT_EQ(PeelColsFor(4, 0), 128u);  // at least 512 cells
  EXPECT_EQ(PeelColsFor(4, 100), 128u);
  EXPECT_EQ(PeelNonzeros(8, 100, 100000), 800u);
  EXPECT_EQ(PeelNonzeros(256, 1470, 235146), 235146u);  // the union cannot exceed the group
  EXPECT_EQ(PeelNonzeros(UINT64_MAX, 2, 10), 10u);      // no overflow
  EXPECT_EQ(PeelNonzeros(3, 0, 10), 0u);
}

TEST(PeelCapacityTest, SimulatedDecodeAtTheRuleRecoversNearlyEverythingAndInventsNothing) {
  const uint64_t workers = 4, k = 500;
  const SketchShape shape{4, static_cast<uint32_t>(PeelColsFor(4, workers * k)), 99};
  const PeelTrial trial = SimulatePeel(shape, 30000, workers, k, 0.0, 1);
  EXPECT_EQ(trial.nonzeros, workers * k);
  EXPECT_GE(trial.recovered_mass, 0.99 * trial.mass);
  EXPECT_EQ(trial.false_coordinates, 0u);
  EXPECT_EQ(trial.wrong_values, 0u);
}

TEST(PeelCapacityTest, OverlapSharesCoordinates) {
  const SketchShape shape{4, 4000, 3};
  const PeelTrial trial = SimulatePeel(shape, 30000, 4, 400, 0.5, 2);
  EXPECT_EQ(trial.nonzeros, 200u + 4 * 200u);  // 200 common, 4 x 200 own
}

// The default shape (count_sketch method=peel without width or cols) at every
// world size from 2 to 256: ~99% of the mass comes back while the workers'
// union is sparse. On the main job's MLP (one group of 235,146) and CNN
// (28,938), at the registry's density and at the densities that keep
// 256 workers' union under a quarter of the group.
TEST(PeelCapacityTest, TheDefaultShapeRecoversAtEveryWorldSize) {
  for (uint64_t dim : {uint64_t{235146}, uint64_t{28938}}) {
    for (double density : {0.00625, 1.0 / 1024}) {
      const uint64_t k = static_cast<uint64_t>(density * dim + 0.5);
      for (uint64_t workers = 2; workers <= 256; workers *= 2) {
        if (workers * k > dim / 4) continue;  // a dense union: FitWarning's case, below
        const uint64_t cols = PeelColsFor(4, PeelNonzeros(workers, k, dim));
        const double recovered = ExpectedPeelRecovery(4, cols, dim, workers, k);
        EXPECT_GE(recovered, 0.985) << "dim " << dim << ", k " << k << ", " << workers << " workers";
      }
    }
  }
}

// When the union covers the group, the chunked hash's runs of consecutive
// coordinates collide along whole runs, and even 4 cells per nonzero fall
// short: such a sketch is larger than the dense gradient anyway.
TEST(PeelCapacityTest, ADenseUnionIsNotRecovered) {
  const uint64_t dim = 235146, k = 1470;
  EXPECT_LT(ExpectedPeelRecovery(4, PeelColsFor(4, dim), dim, 256, k), 0.9);
}

// A table sized for four workers, summed over more: the load passes the
// peel's threshold and recovery collapses (what --workers=8 and 16 met with
// the old fixed width of 4).
TEST(PeelCapacityTest, ATableForFourWorkersFailsAtSixteen) {
  const uint64_t dim = 235146, k = 1470;
  EXPECT_GE(ExpectedPeelRecovery(4, 4 * k, dim, 4, k), 0.985);
  EXPECT_LT(ExpectedPeelRecovery(4, 4 * k, dim, 8, k), 0.5);
  EXPECT_LT(ExpectedPeelRecovery(4, 4 * k, dim, 16, k), 0.1);
}

TEST(PeelCapacityTest, ExpectedRecoveryIsDeterministicAndRefusesDegenerateShapes) {
  EXPECT_EQ(ExpectedPeelRecovery(4, 3000, 100000, 3, 1000), ExpectedPeelRecovery(4, 3000, 100000, 3, 1000));
  EXPECT_EQ(ExpectedPeelRecovery(1, 3000, 100000, 3, 1000), 0.0);  // one row cannot peel
  EXPECT_EQ(ExpectedPeelRecovery(4, 0, 100000, 3, 1000), 0.0);
  EXPECT_EQ(ExpectedPeelRecovery(4, 3000, 100000, 0, 1000), 0.0);
}

}  // namespace
}  // namespace sketchfuse
