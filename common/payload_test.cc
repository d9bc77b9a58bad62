// Payload validation (each invariant named in the message) and merging.
#include "common/payload.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

Payload Sparse(uint64_t dim, std::vector<uint32_t> idx, std::vector<float> val) {
  Payload p;
  p.kind = PayloadKind::kSparse;
  p.dim = dim;
  p.indices = std::move(idx);
  p.values = std::move(val);
  return p;
}

void ExpectInvalid(const Payload& p, absl::string_view needle) {
  absl::Status s = ValidatePayload(p);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find(needle), absl::string_view::npos) << s;
}

TEST(PayloadTest, ValidationNamesTheProblem) {
  EXPECT_TRUE(ValidatePayload(Sparse(10, {1, 5}, {1, 2})).ok());
  ExpectInvalid(Sparse(0, {}, {}), "dim");
  ExpectInvalid(Sparse(10, {1, 5}, {1}), "2 indices but 1 values");
  ExpectInvalid(Sparse(10, {1, 10}, {1, 2}), "indices[1] = 10 is out of range");
  ExpectInvalid(Sparse(10, {5, 5}, {1, 2}), "indices[1] = 5 is not above");
  Payload dense;
  dense.dim = 3;
  dense.values = {1, 2};
  ExpectInvalid(dense, "dense payload has 2 values; dim is 3");
  Payload sketch;
  sketch.kind = PayloadKind::kSketch;
  sketch.dim = 100;
  sketch.sketch = {2, 4, 1};
  sketch.values.resize(7);
  ExpectInvalid(sketch, "needs 8");
  sketch.sketch.rows = 0;
  ExpectInvalid(sketch, "rows");
}

Payload CandidateValues(uint64_t dim, std::vector<float> values) {
  Payload p;
  p.kind = PayloadKind::kCandidateValues;
  p.dim = dim;
  p.values = std::move(values);
  return p;
}

TEST(PayloadTest, CandidateValuesCarryOneToDimValuesAndNoIndices) {
  EXPECT_TRUE(ValidatePayload(CandidateValues(3, {1})).ok());
  EXPECT_TRUE(ValidatePayload(CandidateValues(3, {1, 2, 3})).ok());
  ExpectInvalid(CandidateValues(3, {}), "0 values; a group of dim 3 has 1 to 3 candidates");
  ExpectInvalid(CandidateValues(3, {1, 2, 3, 4}), "4 values; a group of dim 3 has 1 to 3 candidates");
  Payload with_indices = CandidateValues(3, {1});
  with_indices.indices = {0};
  ExpectInvalid(with_indices, "candidate values must carry no indices");
  EXPECT_EQ(CandidateValues(100, {1, 2, 3}).WireBytes(), 12u);
}

TEST(PayloadTest, CandidateValuesMergeElementwiseOnlyWithAsMany) {
  Payload acc = CandidateValues(10, {1, 2, 3});
  ASSERT_TRUE(MergeInto(CandidateValues(10, {10, 20, 30}), &acc).ok());
  EXPECT_EQ(acc.values, (std::vector<float>{11, 22, 33}));
  absl::Status s = MergeInto(CandidateValues(10, {1, 2}), &acc);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("cannot merge 2 candidate values into 3"), absl::string_view::npos) << s;
  EXPECT_EQ(acc.values, (std::vector<float>{11, 22, 33}));
  EXPECT_EQ(MergeInto(Sparse(10, {1, 2, 3}, {1, 1, 1}), &acc).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(PayloadTest, SparseMergeIsUnionWithSums) {
  Payload acc = Sparse(10, {1, 4, 7}, {1, 1, 1});
  ASSERT_TRUE(MergeInto(Sparse(10, {0, 4, 9}, {2, 2, 2}), &acc).ok());
  EXPECT_EQ(acc.indices, (std::vector<uint32_t>{0, 1, 4, 7, 9}));
  EXPECT_EQ(acc.values, (std::vector<float>{2, 1, 3, 1, 2}));
  EXPECT_TRUE(ValidatePayload(acc).ok());
}

TEST(PayloadTest, MismatchedMergeLeavesAccumulatorUnchanged) {
  Payload acc = Sparse(10, {1}, {1});
  absl::Status s = MergeInto(Sparse(11, {1}, {1}), &acc);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(acc.values, std::vector<float>{1});
  Payload dense;
  dense.dim = 10;
  dense.values.assign(10, 1.0f);
  EXPECT_EQ(MergeInto(dense, &acc).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(PayloadTest, WireBytesCountsIndicesAndValues) {
  EXPECT_EQ(Sparse(10, {1, 2}, {1, 2}).WireBytes(), 16u);
}

TEST(PayloadTest, FirstNonFinite) {
  std::vector<float> x(1000, 1.0f);
  EXPECT_FALSE(FirstNonFinite(x).has_value());
  x[700] = std::numeric_limits<float>::infinity();
  x[900] = std::nanf("");
  EXPECT_EQ(FirstNonFinite(x), 700u);
}

}  // namespace
}  // namespace sketchfuse
