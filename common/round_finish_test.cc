#include "common/round_finish.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "common/topk.h"
#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

Update Sparse(uint64_t dim, std::vector<uint32_t> indices, std::vector<float> values) {
  Update u;
  u.dim = dim;
  u.indices = std::move(indices);
  u.values = std::move(values);
  return u;
}

Payload SparsePayload(uint64_t dim, std::vector<uint32_t> indices, std::vector<float> values) {
  Payload p;
  p.kind = PayloadKind::kSparse;
  p.dim = dim;
  p.indices = std::move(indices);
  p.values = std::move(values);
  return p;
}

// A decoder that returns the sum's values at every nonzero, and counts its calls.
RoundDecoder CountingDecoder(int* calls) {
  return [calls](Payload sum) -> absl::StatusOr<Update> {
    ++*calls;
    Update u;
    u.dim = sum.dim;
    for (size_t i = 0; i < sum.values.size(); ++i) {
      if (sum.values[i] != 0) {
        u.indices.push_back(static_cast<uint32_t>(i));
        u.values.push_back(sum.values[i]);
      }
    }
    return u;
  };
}

Payload DenseSum(std::vector<float> values) {
  Payload p;
  p.kind = PayloadKind::kDense;
  p.dim = values.size();
  p.values = std::move(values);
  return p;
}

// The reference re-selection: order every entry by magnitude (ties: the
// lower index first), keep the first k, in ascending index order.
Update ReferenceReselect(const Update& u, uint64_t k) {
  std::vector<size_t> order(u.indices.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::fabs(u.values[a]) > std::fabs(u.values[b]);
  });
  order.resize(std::min<size_t>(k, order.size()));
  std::sort(order.begin(), order.end());
  Update out;
  out.dim = u.dim;
  for (size_t j : order) {
    out.indices.push_back(u.indices[j]);
    out.values.push_back(u.values[j]);
  }
  return out;
}

TEST(FinishRoundTest, OneRoundIsTheDecode) {
  int calls = 0;
  absl::StatusOr<Update> u = FinishRound(RoundRule{1, 0}, 0, DenseSum({0, 3, 0, -2}), CountingDecoder(&calls));
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(u->indices, (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(u->values, (std::vector<float>{3, -2}));
}

TEST(FinishRoundTest, ARoundBeforeTheLastAnswersACandidateList) {
  int calls = 0;
  absl::StatusOr<Update> u = FinishRound(RoundRule{2, 1}, 0, DenseSum({0, 3, 0, -2}), CountingDecoder(&calls));
  ASSERT_TRUE(u.ok()) << u.status();
  // Not re-selected (the rule applies to the final round) and without values.
  EXPECT_EQ(u->indices, (std::vector<uint32_t>{1, 3}));
  EXPECT_TRUE(u->values.empty());
  EXPECT_EQ(u->dim, 4u);
}

TEST(FinishRoundTest, TheLaterRoundIsTheExactSumReselected) {
  int calls = 0;
  absl::StatusOr<Update> u =
      FinishRound(RoundRule{2, 2}, 1, SparsePayload(10, {1, 4, 7}, {0.5f, -3.0f, 2.0f}), CountingDecoder(&calls));
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(calls, 0) << "a later round is not decoded";
  EXPECT_EQ(u->indices, (std::vector<uint32_t>{4, 7}));
  EXPECT_EQ(u->values, (std::vector<float>{-3.0f, 2.0f}));
}

TEST(FinishRoundTest, RefusesRoundsOutsideTheRuleAndUnplacedSums) {
  int calls = 0;
  EXPECT_EQ(FinishRound(RoundRule{1, 0}, 1, SparsePayload(4, {1}, {1}), CountingDecoder(&calls)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FinishRound(RoundRule{2, 0}, 1, DenseSum({1, 2}), CountingDecoder(&calls)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(calls, 0);
}

TEST(FinishRoundTest, TheDecodersErrorIsTheRounds) {
  const RoundDecoder failing = [](Payload) -> absl::StatusOr<Update> { return absl::DataLossError("bad table"); };
  EXPECT_EQ(FinishRound(RoundRule{1, 0}, 0, DenseSum({1}), failing).status().code(), absl::StatusCode::kDataLoss);
}

TEST(ReselectTopKTest, MatchesTheReferenceOnRandomUpdatesOfManySizes) {
  std::mt19937 rng(7);
  for (size_t n : {0, 1, 2, 7, 64, 1000, 4097}) {
    for (uint64_t k : {uint64_t{0}, uint64_t{1}, uint64_t{3}, uint64_t{n / 2}, uint64_t{n}, uint64_t{n + 5}}) {
      Update u;
      u.dim = 10 * n + 1;
      std::uniform_int_distribution<int> ties(-20, 20);  // small integers: many ties
      for (size_t j = 0; j < n; ++j) {
        u.indices.push_back(static_cast<uint32_t>(10 * j + 3));
        u.values.push_back(static_cast<float>(ties(rng)) / 4);
      }
      const Update expected = n <= k ? u : ReferenceReselect(u, k);
      ReselectTopK(k, &u);
      EXPECT_EQ(u.indices, expected.indices) << "n " << n << " k " << k;
      EXPECT_EQ(u.values, expected.values) << "n " << n << " k " << k;
    }
  }
}

TEST(ReselectTopKTest, LeavesADenseUpdateAlone) {
  Update u;
  u.dense = true;
  u.dim = 3;
  u.values = {1, 2, 3};
  ReselectTopK(1, &u);
  EXPECT_EQ(u.values.size(), 3u);
}

TEST(PlaceAtCandidatesTest, PlacesValuesInTheCandidatesOrder) {
  const Update candidates = Sparse(9, {2, 5, 8}, {});
  Payload values;
  values.kind = PayloadKind::kCandidateValues;
  values.dim = 9;
  values.values = {1, 2, 3};
  ASSERT_TRUE(PlaceAtCandidates(candidates, &values).ok());
  EXPECT_EQ(values.kind, PayloadKind::kSparse);
  EXPECT_EQ(values.indices, candidates.indices);
  EXPECT_EQ(values.values, (std::vector<float>{1, 2, 3}));
}

TEST(PlaceAtCandidatesTest, RefusesAnotherCountOrKindNamingIt) {
  const Update candidates = Sparse(9, {2, 5, 8}, {});
  Payload values;
  values.kind = PayloadKind::kCandidateValues;
  values.dim = 9;
  values.values = {1, 2};
  absl::Status s = PlaceAtCandidates(candidates, &values);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("one value for each of the 3 candidates; got 2"), std::string::npos) << s;
  EXPECT_EQ(values.kind, PayloadKind::kCandidateValues) << "unchanged on refusal";
  values.kind = PayloadKind::kDense;
  values.values = {1, 2, 3};
  s = PlaceAtCandidates(candidates, &values);
  EXPECT_NE(s.message().find("dense"), std::string::npos) << s;
  Update dense;
  dense.dense = true;
  dense.dim = 3;
  values.kind = PayloadKind::kCandidateValues;
  EXPECT_FALSE(PlaceAtCandidates(dense, &values).ok());
}

}  // namespace
}  // namespace sketchfuse
