// Every decentralized algorithm on real Gloo groups of 1 to 5 ranks (threads
// with TCP connections on loopback), against direct computations:
//  - the update is identical on every rank;
//  - dense_allreduce is the sum (its bfloat16 form within P roundings to
//    bfloat16), topk_allgather the union-sum of the sent
//    sets, sketch_allreduce the decode of the directly summed sketch (and its
//    second round the exact sums there) or, peeled, the exact sums of what
//    the ranks inserted, importance_allreduce the exact sums at the union of
//    every rank's indices, gtopk and spardl at most k (or k per block);
//  - conservation: the update plus every rank's settled residual equals the
//    sum of the encoded vectors (tolerance 1e-5 of the magnitudes);
//  - a payload of the wrong kind is refused before any communication.
#include "worker/decentralized/algorithms.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <mutex>

#include "common/compressor_registry.h"
#include "common/test_vectors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/local_group.h"
#include "worker/decentralized/bf16_ring.h"

namespace sketchfuse {
namespace {

std::vector<float> Densify(const Update& u) {
  if (u.dense) return u.values;
  std::vector<float> d(u.dim, 0.0f);
  for (size_t j = 0; j < u.indices.size(); ++j) d[u.indices[j]] += u.values[j];
  return d;
}

// The residual after a settlement: released coordinates zeroed, then the
// give-back added.
std::vector<float> Settled(std::vector<float> residual, const Settlement& s) {
  if (s.release.all) {
    std::fill(residual.begin(), residual.end(), 0.0f);
  } else {
    for (uint32_t i : s.release.indices) residual[i] = 0.0f;
  }
  const std::vector<float> back = Densify(s.give_back);
  for (size_t i = 0; i < back.size() && i < residual.size(); ++i) residual[i] += back[i];
  return residual;
}

struct RankResult {
  Payload payload;
  std::vector<float> encoded;
  absl::StatusOr<GroupOutcome> outcome = absl::UnknownError("not run");
  uint64_t bytes_sent = 0;  // by the collective, during the algorithm
};

// Runs `algorithm` on `size` ranks; rank r encodes GaussianVector(dim, seed+r)
// with `spec` (no error feedback: the vector is the residual).
std::vector<RankResult> RunAlgorithm(DecentralizedFn algorithm, int size, uint64_t dim, const std::string& spec,
                            uint64_t k, uint64_t step = 0, bool second_round = false,
                            uint64_t reselect_top_k = 0) {
  std::vector<RankResult> results(size);
  std::unique_ptr<Compressor> decoder = *CompressorRegistry::Default().Create(spec);
  for (int r = 0; r < size; ++r) {
    results[r].encoded = GaussianVector(dim, 1000 * step + 17 * r + dim);
    std::unique_ptr<Compressor> c = *CompressorRegistry::Default().Create(spec);
    EncodeContext context;
    context.step = step;
    const std::vector<float> params = GaussianVector(dim, 5);
    context.params = params;
    results[r].payload = *c->Encode(results[r].encoded, context);
  }
  const std::vector<absl::Status> statuses = RunOnLocalGlooGroup(size, [&](Collective& c) {
    RankResult& mine = results[c.rank()];
    GroupInput input;
    input.step = step;
    input.group = 3;
    input.payload = &mine.payload;
    input.encoded = mine.encoded;
    input.exact_values = ExactValuesFromHost(mine.encoded);
    input.k = k;
    input.rounds = second_round ? 2 : 1;
    input.reselect_top_k = reselect_top_k;
    input.decode = [&decoder](const Payload& sum) { return decoder->Decode(sum); };
    const uint64_t bytes_before = c.bytes_sent();
    mine.outcome = algorithm(c, input);
    mine.bytes_sent = c.bytes_sent() - bytes_before;
    return mine.outcome.status();
  });
  for (int r = 0; r < size; ++r) EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
  return results;
}

void ExpectSameUpdateEverywhere(const std::vector<RankResult>& results) {
  for (size_t r = 1; r < results.size(); ++r) {
    EXPECT_EQ(results[r].outcome->update.indices, results[0].outcome->update.indices) << "rank " << r;
    EXPECT_EQ(results[r].outcome->update.values, results[0].outcome->update.values) << "rank " << r;
  }
}

void ExpectConservation(const std::vector<RankResult>& results) {
  const std::vector<float> update = Densify(results[0].outcome->update);
  std::vector<double> left(update.begin(), update.end()), right(update.size(), 0.0), magnitude(update.size(), 0.0);
  for (const RankResult& r : results) {
    const std::vector<float> residual = Settled(r.encoded, r.outcome->settlement);
    for (size_t i = 0; i < update.size(); ++i) {
      left[i] += residual[i];
      right[i] += r.encoded[i];
      magnitude[i] += std::abs(r.encoded[i]);
    }
  }
  for (size_t i = 0; i < update.size(); ++i) {
    ASSERT_NEAR(left[i], right[i], 1e-5 * magnitude[i] + 1e-6) << "coordinate " << i;
  }
}

struct Case {
  int size;
  uint64_t dim;
};

class AlgorithmsTest : public ::testing::TestWithParam<Case> {};

TEST_P(AlgorithmsTest, TheDenseRoundIsTheSum) {
  const auto [size, dim] = GetParam();
  const std::vector<RankResult> results = RunAlgorithm(&RoundsAllreduce, size, dim, "dense", 0);
  ExpectSameUpdateEverywhere(results);
  ExpectConservation(results);
  EXPECT_TRUE(results[0].outcome->update.dense);
}

TEST_P(AlgorithmsTest, DenseAllreduceBf16IsTheSumWithinBf16Rounding) {
  const auto [size, dim] = GetParam();
  const std::vector<RankResult> results = RunAlgorithm(&DenseAllreduceBf16, size, dim, "dense", 0);
  ExpectSameUpdateEverywhere(results);
  const Update& update = results[0].outcome->update;
  ASSERT_TRUE(update.dense);
  ASSERT_EQ(update.values.size(), dim);
  for (size_t i = 0; i < dim; ++i) {
    double exact = 0, magnitude = 0;
    for (const RankResult& r : results) {
      exact += r.encoded[i];
      magnitude += std::abs(r.encoded[i]);
    }
    // bf16_ring.h's bound: P roundings to bfloat16 (none with one rank).
    ASSERT_LE(std::abs(update.values[i] - exact), size == 1 ? 0.0 : (size * kBf16UnitRoundoff + 1e-6) * magnitude)
        << "coordinate " << i;
  }
  // Everything is released: the residual keeps nothing.
  for (const RankResult& r : results) EXPECT_TRUE(r.outcome->settlement.release.all);
}

TEST_P(AlgorithmsTest, TheSparseRoundIsTheUnionSumOfTheSentSets) {
  const auto [size, dim] = GetParam();
  const uint64_t k = std::max<uint64_t>(1, dim / 10);
  const std::vector<RankResult> results = RunAlgorithm(&RoundsAllreduce, size, dim, "topk:k=" + std::to_string(k), k);
  ExpectSameUpdateEverywhere(results);
  ExpectConservation(results);
  // Direct: sum of the payloads, in rank order.
  std::vector<float> direct(dim, 0.0f);
  std::vector<bool> present(dim, false);
  for (const RankResult& r : results) {
    for (size_t j = 0; j < r.payload.indices.size(); ++j) {
      direct[r.payload.indices[j]] += r.payload.values[j];
      present[r.payload.indices[j]] = true;
    }
  }
  const Update& update = results[0].outcome->update;
  std::vector<uint32_t> expected_indices;
  for (uint32_t i = 0; i < dim; ++i) {
    if (present[i]) expected_indices.push_back(i);
  }
  EXPECT_EQ(update.indices, expected_indices);
  EXPECT_EQ(Densify(update), direct);
}

TEST_P(AlgorithmsTest, SketchAllreduceDecodesTheSummedSketch) {
  const auto [size, dim] = GetParam();
  const std::string spec =
      "count_sketch:method=estimate,k=" + std::to_string(std::max<uint64_t>(1, dim / 20)) + ",rows=3,width=4";
  for (bool second_round : {false, true}) {
    const std::vector<RankResult> results = RunAlgorithm(&RoundsAllreduce, size, dim, spec, 0, 0, second_round);
    ExpectSameUpdateEverywhere(results);
    // The direct computation: sum the tables, decode once.
    Payload sum = results[0].payload;
    for (int r = 1; r < size; ++r) ASSERT_TRUE(MergeInto(results[r].payload, &sum).ok());
    const Update direct = *(*CompressorRegistry::Default().Create(spec))->Decode(sum);
    const Update& update = results[0].outcome->update;
    EXPECT_EQ(update.indices, direct.indices) << "second round " << second_round;
    for (size_t j = 0; j < update.indices.size() && j < direct.indices.size(); ++j) {
      double expected = direct.values[j], magnitude = std::abs(direct.values[j]);
      if (second_round) {
        expected = magnitude = 0;
        for (const RankResult& r : results) {
          expected += r.encoded[update.indices[j]];
          magnitude += std::abs(r.encoded[update.indices[j]]);
        }
      }
      EXPECT_NEAR(update.values[j], expected, 1e-5 * magnitude + 1e-6) << j;
    }
    if (second_round) ExpectConservation(results);
  }
}

// method=peel: every rank applies the exact sums of the ranks' inserted
// entries at the coordinates it could separate (nearly all of them at a
// quarter load), and conservation holds without a second round: each rank
// releases only what it inserted and got back.
TEST_P(AlgorithmsTest, SketchAllreducePeelsTheExactSumsOfTheInsertedEntries) {
  const auto [size, dim] = GetParam();
  const uint64_t k = std::max<uint64_t>(1, dim / 50);
  const std::string spec = "count_sketch:method=peel,k=" + std::to_string(k) + ",rows=4,width=" + std::to_string(size);
  for (uint64_t step : {0, 1}) {
    const std::vector<RankResult> results = RunAlgorithm(&RoundsAllreduce, size, dim, spec, 0, step);
    ExpectSameUpdateEverywhere(results);
    std::vector<double> inserted(dim, 0.0), magnitude(dim, 0.0);
    for (const RankResult& r : results) {
      ASSERT_TRUE(r.payload.inserted.has_value());
      for (uint32_t i : *r.payload.inserted) {
        inserted[i] += r.encoded[i];
        magnitude[i] += std::abs(r.encoded[i]);
      }
    }
    uint64_t nonzeros = 0;
    for (double m : magnitude) nonzeros += m > 0;
    const Update& update = results[0].outcome->update;
    for (size_t j = 0; j < update.indices.size(); ++j) {
      const uint32_t i = update.indices[j];
      ASSERT_GT(magnitude[i], 0.0) << "coordinate " << i << " was inserted by no rank";
      EXPECT_NEAR(update.values[j], inserted[i], 1e-5 * magnitude[i]) << "coordinate " << i;
    }
    // Peeling separates nearly every coordinate at a quarter load once rows
    // are long enough for the load to be what it is on average (tiny
    // sketches, a few cells per row, are at the mercy of single collisions).
    if (results[0].payload.sketch.cols >= 64) {
      EXPECT_GE(update.indices.size() * 10, nonzeros * 9) << "step " << step;
    }
    ExpectConservation(results);
  }
}

TEST_P(AlgorithmsTest, ImportanceAllreduceSumsExactlyAtTheUnionOfEveryRanksIndices) {
  const auto [size, dim] = GetParam();
  const uint64_t k = std::max<uint64_t>(1, dim / 10);
  for (uint64_t step : {0, 1, 2}) {
    const std::vector<RankResult> results =
        RunAlgorithm(&ImportanceAllreduce, size, dim, "importance:k=" + std::to_string(k), k, step);
    ExpectSameUpdateEverywhere(results);
    ExpectConservation(results);
    // Every rank's important coordinates are applied at every step (a
    // rotating root applied only its own, and the others' waited for their
    // turn), with the exact sums of every rank's encoded values.
    std::vector<uint32_t> expected;
    for (const RankResult& r : results) {
      expected.insert(expected.end(), r.payload.indices.begin(), r.payload.indices.end());
    }
    std::sort(expected.begin(), expected.end());
    expected.erase(std::unique(expected.begin(), expected.end()), expected.end());
    const Update& update = results[0].outcome->update;
    ASSERT_EQ(update.indices, expected) << "step " << step;
    for (size_t j = 0; j < expected.size(); ++j) {
      double sum = 0, magnitude = 0;
      for (const RankResult& r : results) {
        sum += r.encoded[expected[j]];
        magnitude += std::abs(r.encoded[expected[j]]);
      }
      EXPECT_NEAR(update.values[j], sum, 1e-5 * magnitude + 1e-6) << "step " << step << " index " << expected[j];
    }
  }
}

TEST_P(AlgorithmsTest, GTopKKeepsAtMostKAndLosesNothing) {
  const auto [size, dim] = GetParam();
  const uint64_t k = std::max<uint64_t>(1, dim / 10);
  const std::vector<RankResult> results = RunAlgorithm(&GTopK, size, dim, "topk:k=" + std::to_string(k), k);
  ExpectSameUpdateEverywhere(results);
  ExpectConservation(results);
  EXPECT_LE(results[0].outcome->update.indices.size(), k);
  if (size == 1) EXPECT_EQ(results[0].outcome->update.indices, results[0].payload.indices);
  // What was not selected stays with its owner: a rank releases, and masks
  // the velocity at, exactly its own coordinates that the global top-k holds,
  // and gives back only shares of those coordinates.
  const std::vector<uint32_t>& global = results[0].outcome->update.indices;
  for (const RankResult& r : results) {
    std::vector<uint32_t> own_applied;
    std::set_intersection(r.payload.indices.begin(), r.payload.indices.end(), global.begin(), global.end(),
                          std::back_inserter(own_applied));
    EXPECT_EQ(r.outcome->settlement.release.indices, own_applied);
    EXPECT_EQ(r.outcome->settlement.velocity_mask.indices, own_applied);
    for (uint32_t i : r.outcome->settlement.give_back.indices) {
      EXPECT_TRUE(std::binary_search(global.begin(), global.end(), i)) << "gave back " << i << ", not applied";
    }
  }
  // With more than one rank and sets that overlap little, some own
  // coordinates lose (else the test would not tell the rules apart).
  if (size > 1 && dim >= 1000) {
    size_t released = 0, sent = 0;
    for (const RankResult& r : results) {
      released += r.outcome->settlement.release.indices.size();
      sent += r.payload.indices.size();
    }
    EXPECT_LT(released, sent);
  }
}

// The fixed-size two-round sketch: every rank applies the top k of the
// exact sums at the candidates decoded from the summed tables, the same
// candidates the direct decode of the summed tables gives; conservation
// holds (every rank released its residual where the update applied); and
// each rank sends two ring allreduces, of the table and of the candidates'
// values, whatever the number of ranks.
TEST_P(AlgorithmsTest, TheFixedSketchsRoundsApplyTheTopKOfTheExactSumsAtTheCandidates) {
  const auto [size, dim] = GetParam();
  const uint64_t k = std::max<uint64_t>(1, dim / 40);
  const std::string spec = "count_sketch:method=candidates,k=" + std::to_string(k) + ",rows=1,width=2,candidates=2";
  for (uint64_t step : {0, 1}) {
    SCOPED_TRACE(testing::Message() << "step " << step);
    const std::vector<RankResult> results = RunAlgorithm(&RoundsAllreduce, size, dim, spec, k, step,
                                                         /*second_round=*/true, /*reselect_top_k=*/k);
    ExpectSameUpdateEverywhere(results);
    ExpectConservation(results);
    // The direct computation: sum the tables, decode the candidates once,
    // sum the exact values there.
    Payload sum = results[0].payload;
    for (int r = 1; r < size; ++r) ASSERT_TRUE(MergeInto(results[r].payload, &sum).ok());
    const Update candidates = *(*CompressorRegistry::Default().Create(spec))->Decode(sum);
    ASSERT_EQ(candidates.indices.size(), std::min<uint64_t>(dim, 2 * k));
    std::vector<double> exact(candidates.indices.size(), 0.0), magnitude(candidates.indices.size(), 0.0);
    for (size_t j = 0; j < exact.size(); ++j) {
      for (const RankResult& r : results) {
        exact[j] += r.encoded[candidates.indices[j]];
        magnitude[j] += std::abs(r.encoded[candidates.indices[j]]);
      }
    }
    const Update& update = results[0].outcome->update;
    ASSERT_EQ(update.indices.size(), std::min<uint64_t>(k, candidates.indices.size()));
    ASSERT_TRUE(std::is_sorted(update.indices.begin(), update.indices.end()));
    double smallest_applied = INFINITY;
    std::vector<bool> applied(exact.size(), false);
    for (size_t j = 0; j < update.indices.size(); ++j) {
      const auto at = std::lower_bound(candidates.indices.begin(), candidates.indices.end(), update.indices[j]);
      ASSERT_TRUE(at != candidates.indices.end() && *at == update.indices[j])
          << "coordinate " << update.indices[j] << " is not a candidate";
      const size_t c = at - candidates.indices.begin();
      applied[c] = true;
      EXPECT_NEAR(update.values[j], exact[c], 1e-5 * magnitude[c] + 1e-6) << "coordinate " << update.indices[j];
      smallest_applied = std::min(smallest_applied, std::abs(exact[c]));
    }
    // No candidate left out has a larger exact sum than one applied.
    for (size_t c = 0; c < exact.size(); ++c) {
      if (!applied[c]) EXPECT_LE(std::abs(exact[c]), smallest_applied + 1e-5 * magnitude[c] + 1e-6) << c;
    }
    // Bytes: the table's ring allreduce and the candidates', at any size.
    for (const RankResult& r : results) {
      EXPECT_EQ(r.bytes_sent,
                RingAllReduceBytes(r.payload.values.size(), size) + RingAllReduceBytes(candidates.indices.size(), size));
    }
  }
}

TEST_P(AlgorithmsTest, SparDLKeepsKPerBlockAndLosesNothing) {
  const auto [size, dim] = GetParam();
  const uint64_t k = std::max<uint64_t>(1, dim / 10);
  const std::vector<RankResult> results = RunAlgorithm(&SparDL, size, dim, "topk:k=" + std::to_string(k), k);
  ExpectSameUpdateEverywhere(results);
  ExpectConservation(results);
  int p2 = 1;
  while (2 * p2 <= size) p2 *= 2;
  const uint64_t per_block = std::max<uint64_t>(1, (k + p2 - 1) / p2);
  EXPECT_LE(results[0].outcome->update.indices.size(), per_block * p2);
  // Heavy coordinates survive: with one rank SparDL is the local top-k.
  if (size == 1 && dim >= 10) {
    EXPECT_EQ(results[0].outcome->update.indices.size(), k);
  }
}

INSTANTIATE_TEST_SUITE_P(Groups, AlgorithmsTest,
                         ::testing::Values(Case{1, 1}, Case{1, 1000}, Case{2, 37}, Case{2, 5000}, Case{3, 1000},
                                           Case{4, 5000}, Case{4, 100003}, Case{5, 2001}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return "ranks" + std::to_string(info.param.size) + "_dim" + std::to_string(info.param.dim);
                         });

TEST(AlgorithmsInputTest, APayloadOfTheWrongKindIsRefusedBeforeAnyCommunication) {
  const std::vector<absl::Status> statuses = RunOnLocalGlooGroup(2, [](Collective& c) {
    Payload dense;
    dense.dim = 4;
    dense.values = {1, 2, 3, 4};
    GroupInput input;
    input.payload = &dense;
    input.encoded = dense.values;
    input.k = 1;
    for (DecentralizedFn algorithm : {&GTopK, &ImportanceAllreduce, &SparDL}) {
      absl::StatusOr<GroupOutcome> outcome = algorithm(c, input);
      EXPECT_EQ(outcome.status().code(), absl::StatusCode::kInvalidArgument) << outcome.status();
    }
    // The rounds run nothing without the group's decoder, and sum no
    // candidate values in round 0.
    EXPECT_EQ(RoundsAllreduce(c, input).status().code(), absl::StatusCode::kInvalidArgument);
    Payload values;
    values.kind = PayloadKind::kCandidateValues;
    values.dim = 4;
    values.values = {1, 2};
    input.payload = &values;
    input.decode = [](const Payload&) -> absl::StatusOr<Update> { return Update(); };
    EXPECT_EQ(RoundsAllreduce(c, input).status().code(), absl::StatusCode::kInvalidArgument);
    input.payload = nullptr;
    EXPECT_EQ(RoundsAllreduce(c, input).status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(DenseAllreduceBf16(c, input).status().code(), absl::StatusCode::kInvalidArgument);
    // The group is intact afterwards.
    std::vector<float> x = {1};
    return c.AllReduceSum(absl::MakeSpan(x));
  });
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace sketchfuse
