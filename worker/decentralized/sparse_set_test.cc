// Sparse-set operations against direct computations on dense vectors, and
// refusal of malformed messages.
#include "worker/decentralized/sparse_set.h"

#include <map>

#include "common/test_vectors.h"
#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

Update Set(uint64_t dim, std::vector<uint32_t> indices, std::vector<float> values) {
  Update u = EmptySparse(dim);
  u.indices = std::move(indices);
  u.values = std::move(values);
  return u;
}

std::vector<float> Densify(const Update& u) {
  std::vector<float> d(u.dim, 0.0f);
  for (size_t j = 0; j < u.indices.size(); ++j) d[u.indices[j]] += u.values[j];
  return d;
}

TEST(SparseSetTest, SumIsTheUnionWithSums) {
  const Update a = Set(10, {1, 4, 7}, {1, 2, 3});
  const Update b = Set(10, {0, 4, 9}, {5, -2, 1});
  const Update sum = SumSparse(a, b);
  EXPECT_EQ(sum.indices, (std::vector<uint32_t>{0, 1, 4, 7, 9}));
  EXPECT_EQ(sum.values, (std::vector<float>{5, 1, 0, 3, 1}));
  EXPECT_EQ(SumSparse(a, EmptySparse(10)).indices, a.indices);
}

TEST(SparseSetTest, KeepTopKMovesTheRestToDroppedAndConservesTheSum) {
  for (uint64_t k : {0, 1, 5, 50, 500}) {
    const std::vector<float> x = GaussianVector(200, 3 + k);
    Update set = EmptySparse(200);
    for (uint32_t i = 0; i < 200; i += 2) {
      set.indices.push_back(i);
      set.values.push_back(x[i]);
    }
    const std::vector<float> before = Densify(set);
    Update dropped = Set(200, {1}, {0.5f});
    KeepTopK(k, &set, &dropped);
    EXPECT_EQ(set.indices.size(), std::min<uint64_t>(k, 100));
    std::vector<float> after = Densify(set);
    const std::vector<float> rest = Densify(dropped);
    for (size_t i = 0; i < 200; ++i) EXPECT_EQ(after[i] + rest[i], before[i] + (i == 1 ? 0.5f : 0.0f)) << i;
    // Every kept magnitude is at least every dropped one (index 1 aside).
    float smallest_kept = 1e30f, largest_dropped = 0;
    for (float v : set.values) smallest_kept = std::min(smallest_kept, std::abs(v));
    for (size_t j = 0; j < dropped.indices.size(); ++j) {
      if (dropped.indices[j] != 1) largest_dropped = std::max(largest_dropped, std::abs(dropped.values[j]));
    }
    if (!set.values.empty()) {
      EXPECT_GE(smallest_kept, largest_dropped);
    }
  }
}

TEST(SparseSetTest, TakeTopKTakesTheLargestOfTheRangeAndZeroesThem) {
  std::vector<float> x = {0, 5, -7, 0, 1, 9, -2, 0};
  const Update taken = TakeTopK(absl::MakeSpan(x), 1, 6, 2);
  EXPECT_EQ(taken.indices, (std::vector<uint32_t>{2, 5}));
  EXPECT_EQ(taken.values, (std::vector<float>{-7, 9}));
  EXPECT_EQ(x, (std::vector<float>{0, 5, 0, 0, 1, 0, -2, 0}));
  // Zeros are never taken.
  std::vector<float> zeros(5, 0.0f);
  EXPECT_TRUE(TakeTopK(absl::MakeSpan(zeros), 0, 5, 3).indices.empty());
}

TEST(SparseSetTest, SerializedSetsRoundTripAndMalformedOnesAreRefused) {
  const Update a = Set(100, {3, 50, 99}, {1.5f, -2, 0.25f});
  absl::StatusOr<Update> back = ParseSparse(SerializeSparse(a), 100);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->indices, a.indices);
  EXPECT_EQ(back->values, a.values);
  std::string bytes = SerializeSparse(a);
  EXPECT_EQ(ParseSparse(bytes.substr(0, 5), 100).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ParseSparse(bytes + "x", 100).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ParseSparse(bytes, 99).status().code(), absl::StatusCode::kDataLoss);  // index 99 out of range
  const Update unordered = Set(100, {50, 3}, {1, 1});
  EXPECT_EQ(ParseSparse(SerializeSparse(unordered), 100).status().code(), absl::StatusCode::kDataLoss);
}

TEST(SparseSetTest, SumPackedSetsMatchesADirectSumInRankOrder) {
  std::vector<Update> sets = {Set(20, {1, 5}, {1, 2}), EmptySparse(20), Set(20, {0, 5, 19}, {3, 4, 5})};
  std::vector<uint32_t> words;
  std::vector<size_t> counts;
  std::vector<float> expected(20, 0.0f);
  for (const Update& s : sets) {
    const std::vector<uint32_t> w = PackWords(s);
    words.insert(words.end(), w.begin(), w.end());
    counts.push_back(w.size());
    const std::vector<float> d = Densify(s);
    for (size_t i = 0; i < 20; ++i) expected[i] += d[i];
  }
  absl::StatusOr<Update> sum = SumPackedSets(words, counts, 20);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(sum->indices, (std::vector<uint32_t>{0, 1, 5, 19}));
  EXPECT_EQ(Densify(*sum), expected);
  EXPECT_EQ(SumPackedSets(words, {3, 0, 6}, 20).status().code(), absl::StatusCode::kDataLoss);  // odd block
  EXPECT_EQ(SumPackedSets(words, counts, 10).status().code(), absl::StatusCode::kDataLoss);     // index 19
}

}  // namespace
}  // namespace sketchfuse
