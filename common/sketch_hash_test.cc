// Tests of the Count-Sketch hash family: the chunked layout (consecutive
// cells within a chunk, chunk lengths), range, uniformity of chunk offsets
// (chi-square), collision probabilities over seeds (0 within a chunk, 1/cols
// across chunks), signs, and that seeds and rows give distinct hashes.
#include "common/sketch_hash.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

// Chi-square statistic of counts against the uniform distribution.
double ChiSquare(const std::vector<uint64_t>& counts, double expected) {
  double chi2 = 0;
  for (uint64_t c : counts) chi2 += (c - expected) * (c - expected) / expected;
  return chi2;
}

uint32_t Bucket(const RowHash& h, uint32_t i, uint32_t cols) {
  return BucketOfIndex(h, i, cols, ChunkShift(cols));
}

TEST(SketchHashTest, ChunkLengthIsTheLargestPowerOfTwoWithinColsAndTheCap) {
  EXPECT_EQ(ChunkShift(1), 0u);
  EXPECT_EQ(ChunkShift(2), 1u);
  EXPECT_EQ(ChunkShift(3), 1u);
  EXPECT_EQ(ChunkShift(4), 2u);
  EXPECT_EQ(ChunkShift(1000), 9u);
  EXPECT_EQ(ChunkShift(1023), 9u);
  EXPECT_EQ(ChunkShift(1024), 10u);
  EXPECT_EQ(ChunkShift(501118), 10u);
  EXPECT_EQ(ChunkShift(kMaxSketchCols), 10u);
  for (uint32_t cols = 1; cols < 5000; ++cols) {
    const uint32_t length = 1u << ChunkShift(cols);
    ASSERT_LE(length, cols);
    ASSERT_LE(length, kMaxChunkLength);
    ASSERT_TRUE(2 * length > cols || length == kMaxChunkLength) << cols;
  }
}

TEST(SketchHashTest, ChunksLandOnConsecutiveCellsThatWrapAround) {
  for (uint32_t cols : {1u, 2u, 3u, 7u, 100u, 1024u, 4099u, 501118u}) {
    const RowHash h = MakeRowHash(11, 2);
    const uint32_t shift = ChunkShift(cols);
    const uint32_t length = 1u << shift;
    for (uint32_t chunk : {0u, 1u, 2u, 1000u, (0xFFFFFFFFu >> shift)}) {
      const uint32_t first = chunk << shift;
      const uint32_t offset = ChunkOffset(h, chunk, cols);
      ASSERT_LT(offset, cols);
      for (uint32_t p = 0; p < length; ++p) {
        ASSERT_EQ(Bucket(h, first + p, cols), (offset + p) % cols)
            << "cols " << cols << " chunk " << chunk << " position " << p;
      }
    }
  }
}

TEST(SketchHashTest, BucketStaysInRangeAtLimits) {
  const RowHash h = MakeRowHash(9, 0);
  for (uint32_t cols : {1u, 2u, 3u, 1023u, 1025u, kMaxSketchCols - 1, kMaxSketchCols}) {
    for (uint32_t i : {0u, 1u, 1023u, 1024u, 12345u, 0xFFFFFFFEu, 0xFFFFFFFFu}) {
      EXPECT_LT(Bucket(h, i, cols), cols);
    }
  }
  EXPECT_EQ(BucketOf(0x7FFFFFFFu, 10), 9u);
  EXPECT_EQ(BucketOf(0x80000000u, 10), 0u);
  EXPECT_EQ(CellAfter(9, 0, 10), 9u);
  EXPECT_EQ(CellAfter(9, 1, 10), 0u);
  EXPECT_EQ(CellAfter(kMaxSketchCols - 1, kMaxChunkLength - 1, kMaxSketchCols),
            kMaxChunkLength - 2);
  EXPECT_EQ(CellsBeforeWrap(0, 5, 10), 5u);
  EXPECT_EQ(CellsBeforeWrap(5, 5, 10), 5u);
  EXPECT_EQ(CellsBeforeWrap(9, 5, 10), 1u);
  EXPECT_EQ(SignOf(0x80000000u), -1.0f);
  EXPECT_EQ(SignOf(0x7FFFFFFFu), 1.0f);
}

struct UniformityCase {
  uint32_t cols;
  uint64_t seed;
  uint32_t row;
};

class OffsetUniformityTest : public ::testing::TestWithParam<UniformityCase> {};

// Chunk offsets are the family's only bucket randomness: over consecutive
// chunk ids (the order gradients come in) they must be uniform on [0, cols).
TEST_P(OffsetUniformityTest, ChiSquareWithinFiveSigma) {
  const UniformityCase c = GetParam();
  const uint32_t chunks = c.cols * 64;  // 64 expected per cell
  std::vector<uint64_t> counts(c.cols, 0);
  const RowHash h = MakeRowHash(c.seed, c.row);
  for (uint32_t chunk = 0; chunk < chunks; ++chunk) ++counts[ChunkOffset(h, chunk, c.cols)];
  // Chi-square with cols-1 degrees of freedom: mean cols-1, sd sqrt(2(cols-1)).
  const double dof = c.cols - 1;
  EXPECT_LT(std::abs(ChiSquare(counts, 64.0) - dof), 5 * std::sqrt(2 * dof))
      << "cols=" << c.cols << " seed=" << c.seed << " row=" << c.row;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, OffsetUniformityTest,
    ::testing::Values(UniformityCase{2, 1, 0}, UniformityCase{7, 1, 1},
                      UniformityCase{1000, 42, 0}, UniformityCase{1000, 42, 4},
                      UniformityCase{4099, 7, 2}, UniformityCase{65536, 3, 1}));

TEST(SketchHashTest, SignsAreBalancedAndPairwiseUncorrelated) {
  const RowHash h = MakeRowHash(123, 3);
  const uint32_t n = 1 << 20;
  double sum = 0, lag1 = 0, lag_far = 0;
  float prev = SignOfIndex(h, 0);
  sum += prev;
  for (uint32_t i = 1; i < n; ++i) {
    const float s = SignOfIndex(h, i);
    sum += s;
    lag1 += s * prev;
    lag_far += s * SignOfIndex(h, i ^ 0x5555u);
    prev = s;
  }
  // Each sum has standard deviation sqrt(n) = 1024 for independent signs.
  EXPECT_LT(std::abs(sum), 5 * 1024.0);
  EXPECT_LT(std::abs(lag1), 5 * 1024.0);
  EXPECT_LT(std::abs(lag_far), 5 * 1024.0);
}

TEST(SketchHashTest, BucketAndSignOfACoordinateAreJointlyUniformOverSeeds) {
  const uint32_t cols = 64;
  for (uint32_t i : {0u, 5u, 1023u, 77777u}) {
    std::vector<uint64_t> counts(2 * cols, 0);
    const uint32_t seeds = 2 * cols * 64;
    for (uint32_t s = 0; s < seeds; ++s) {
      const RowHash h = MakeRowHash(s, 1);
      ++counts[2 * Bucket(h, i, cols) + SignBitOf(HashBits(h.sign, i))];
    }
    const double dof = 2 * cols - 1;
    EXPECT_LT(std::abs(ChiSquare(counts, 64.0) - dof), 5 * std::sqrt(2 * dof)) << i;
  }
}

TEST(SketchHashTest, PairsCollideOnlyAcrossChunksWithProbabilityOneOverCols) {
  // The family's guarantee is over the seed: for a fixed pair of coordinates
  // in different chunks, Pr[bucket(i) == bucket(j)] = 1/cols; in the same
  // chunk, 0. Signs agree with probability 1/2 either way.
  const uint32_t cols = 64;  // chunks of 64
  const int seeds = 64000;
  struct Pair {
    uint32_t i, j;
    bool same_chunk;
  };
  for (const Pair& pair : {Pair{0, 1, true}, Pair{5, 63, true}, Pair{63, 64, false},
                           Pair{100, 100 + 1024, false}, Pair{7, 7 + 64, false},
                           Pair{3, 0xFFFFFFF0u, false}}) {
    int bucket_collisions = 0, same_sign = 0;
    for (int s = 0; s < seeds; ++s) {
      const RowHash h = MakeRowHash(s, 0);
      bucket_collisions += Bucket(h, pair.i, cols) == Bucket(h, pair.j, cols);
      same_sign += SignOfIndex(h, pair.i) == SignOfIndex(h, pair.j);
    }
    // Binomial(64000, 1/64): mean 1000, sd 31; Binomial(64000, 1/2): sd 126.
    if (pair.same_chunk) {
      EXPECT_EQ(bucket_collisions, 0) << pair.i << "," << pair.j;
    } else {
      EXPECT_NEAR(bucket_collisions, 1000, 5 * 31) << pair.i << "," << pair.j;
    }
    EXPECT_NEAR(same_sign, 32000, 5 * 126) << pair.i << "," << pair.j;
  }
}

TEST(SketchHashTest, RowsAndSeedsGiveDifferentFunctions) {
  const uint32_t cols = 1 << 16;
  auto agreement = [cols](const RowHash& x, const RowHash& y) {
    int same = 0;
    for (uint32_t i = 0; i < 10000 * 1024; i += 1024) {  // one coordinate per chunk
      same += Bucket(x, i, cols) == Bucket(y, i, cols);
    }
    return same;
  };
  // Two independent functions agree on about 10000 / 65536 < 1 chunk.
  EXPECT_LT(agreement(MakeRowHash(1, 0), MakeRowHash(1, 1)), 10);
  EXPECT_LT(agreement(MakeRowHash(1, 0), MakeRowHash(2, 0)), 10);
  EXPECT_EQ(agreement(MakeRowHash(5, 2), MakeRowHash(5, 2)), 10000);
}

TEST(SketchHashTest, DefinitionIsPinned) {
  // The family is part of the wire format: sketches from different builds
  // (CPU, GPU, every worker and server) must agree. These values pin it.
  EXPECT_EQ(SplitMix64(0, 0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(Fmix32(0), 0u);
  EXPECT_EQ(Fmix32(1), 0x514E28B7u);  // MurmurHash3 fmix32(1)
  const RowHash h = MakeRowHash(0, 0);
  EXPECT_EQ(h.sign.a, SplitMix64(0, 0));
  EXPECT_EQ(h.sign.b, SplitMix64(0, 1));
  EXPECT_EQ(h.offset.a, SplitMix64(0, 2 * kMaxSketchRows));
  EXPECT_EQ(h.offset.b, SplitMix64(0, 2 * kMaxSketchRows + 1));
  // HashBits is the 64-bit multiply-add-shift of the definition, and the
  // bucket and sign follow from it as stated.
  for (uint64_t seed = 0; seed < 100; ++seed) {
    const RowHash g = MakeRowHash(seed, seed % 7);
    for (uint32_t i : {0u, 1u, 2u, 77u, 65535u, 123456789u, 0xFFFFFFFEu, 0xFFFFFFFFu}) {
      const auto mas = [](MultiplyAddShift f, uint32_t key) {
        return static_cast<uint32_t>((f.a * Fmix32(key) + f.b) >> 32);
      };
      EXPECT_EQ(HashBits(g.sign, i), mas(g.sign, i));
      for (uint32_t cols : {1u, 1000u, 501118u}) {
        const uint32_t length = 1u << ChunkShift(cols);
        const uint64_t offset = (uint64_t{mas(g.offset, i / length) & 0x7FFFFFFFu} * cols) >> 31;
        EXPECT_EQ(Bucket(g, i, cols), (offset + i % length) % cols);
      }
      EXPECT_EQ(SignOfIndex(g, i), (mas(g.sign, i) >> 31) ? -1.0f : 1.0f);
    }
  }
  // Literal values, so that a change to any part shows here. Values that
  // move mean a new hash family: bump kSketchHashFamily (sketch_hash.h) with
  // them, so that builds of the two families refuse each other's sketches.
  static_assert(kSketchHashFamily == 2, "the literals below are hash family 2's");
  EXPECT_EQ(Bucket(MakeRowHash(42, 0), 0, 501118), 8841u);
  EXPECT_EQ(Bucket(MakeRowHash(42, 4), 123456789, 501118), 448436u);
  EXPECT_EQ(Bucket(MakeRowHash(7, 1), 1000, 1000), 332u);
  std::string signs;
  for (uint32_t i = 0; i < 16; ++i) signs += SignOfIndex(MakeRowHash(42, 3), 1000 * i) > 0 ? '+' : '-';
  EXPECT_EQ(signs, "-+-+++-+----++++");
}

}  // namespace
}  // namespace sketchfuse
