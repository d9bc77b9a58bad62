// PowerSGD against a reference written here in double precision: its
// matrix products and Gram-Schmidt on random matrices of many shapes, and
// its two rounds over 2, 3 and 5 workers (every worker's compressor, the
// sums made here) against the algorithm of the paper; exact recovery of a
// low-rank sum, conservation with error feedback, the warm start, the
// layout, the spec and every refusal. Tolerances: relative 1e-4 on the
// update (float products of up to a few hundred terms), 1e-5 on the
// factors' products.
#include "common/compressors/power_sgd.h"

#include <algorithm>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/compressor.h"
#include "common/compressor_registry.h"
#include "common/compressors/power_sgd_reference.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

using ::testing::HasSubstr;
using Blocks = std::vector<std::pair<uint64_t, uint64_t>>;

std::vector<float> Random(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

using power_sgd_reference::GramSchmidt;
using power_sgd_reference::Matrix;
using power_sgd_reference::Product;
using power_sgd_reference::ReferenceStep;
using power_sgd_reference::ToDouble;
using power_sgd_reference::Transposed;

std::unique_ptr<Compressor> Make(const std::string& spec) {
  absl::StatusOr<std::unique_ptr<Compressor>> made = CompressorRegistry::Default().Create(spec);
  EXPECT_TRUE(made.ok()) << spec << ": " << made.status();
  return made.ok() ? *std::move(made) : nullptr;
}

std::string SpecOf(const Blocks& blocks, uint64_t rank, uint64_t seed = 7) {
  return absl::StrCat("powersgd:rank=", rank, ",seed=", seed, ",shapes=", BlockShapesText(blocks));
}

TEST(PowerSgdMathTest, ProductsAndGramSchmidtMatchTheReference) {
  std::mt19937 rng(1);
  for (const auto& [rows, cols, rank] : std::vector<std::tuple<size_t, size_t, size_t>>{
           {2, 3, 1}, {7, 5, 2}, {16, 33, 4}, {64, 10, 8}, {3, 300, 2}, {257, 129, 4}}) {
    SCOPED_TRACE(absl::StrCat(rows, "x", cols, " rank ", rank));
    const std::vector<float> m = Random(rows * cols, rng), q = Random(cols * rank, rng), p = Random(rows * rank, rng);
    std::vector<float> got(rows * rank);
    MultiplyByFactor(m, q, rows, cols, rank, absl::MakeSpan(got));
    const Matrix want = Product(ToDouble(m), ToDouble(q), rows, cols, rank);
    for (size_t e = 0; e < got.size(); ++e) ASSERT_NEAR(got[e], want[e], 1e-5 * (1 + std::abs(want[e])));
    std::vector<float> back(cols * rank);
    MultiplyTransposedByFactor(m, p, rows, cols, rank, absl::MakeSpan(back));
    const Matrix want_back = Product(Transposed(ToDouble(m), rows, cols), ToDouble(p), cols, rows, rank);
    for (size_t e = 0; e < back.size(); ++e) ASSERT_NEAR(back[e], want_back[e], 1e-5 * (1 + std::abs(want_back[e])));
    std::vector<float> out(rows * cols);
    MultiplyFactors(p, q, rows, cols, rank, absl::MakeSpan(out));
    const Matrix want_out = Product(ToDouble(p), Transposed(ToDouble(q), cols, rank), rows, rank, cols);
    for (size_t e = 0; e < out.size(); ++e) ASSERT_NEAR(out[e], want_out[e], 1e-5 * (1 + std::abs(want_out[e])));
    if (rank <= rows) {
      std::vector<float> ortho = p;
      OrthonormalizeColumns(absl::MakeSpan(ortho), rows, rank);
      const Matrix want_ortho = GramSchmidt(ToDouble(p), rows, rank);
      for (size_t e = 0; e < ortho.size(); ++e) ASSERT_NEAR(ortho[e], want_ortho[e], 1e-5);
      // Orthonormal: P^T P = I.
      const Matrix gram = Product(Transposed(ToDouble(ortho), rows, rank), ToDouble(ortho), rank, rows, rank);
      for (size_t i = 0; i < rank; ++i)
        for (size_t j = 0; j < rank; ++j) ASSERT_NEAR(gram[i * rank + j], i == j ? 1.0 : 0.0, 1e-5);
    }
  }
  // A zero column stays zero (no NaN).
  std::vector<float> zeros(6, 0.0f);
  OrthonormalizeColumns(absl::MakeSpan(zeros), 3, 2);
  for (float v : zeros) EXPECT_EQ(v, 0.0f);
}

TEST(PowerSgdLayoutTest, MatricesWhoseFactorsAreSmallerAreCompressedTheRestSentWhole) {
  absl::StatusOr<LowRankLayout> layout = MakeLowRankLayout({{256, 784}, {1, 256}, {5, 6}, {20, 1000}}, 4,
                                                           256 * 784 + 256 + 30 + 20000);
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_EQ(layout->blocks.size(), 4u);
  EXPECT_TRUE(layout->blocks[0].compressed);
  EXPECT_FALSE(layout->blocks[1].compressed) << "a vector";
  EXPECT_FALSE(layout->blocks[2].compressed) << "(5 + 6) * 4 = 44 is not below 30";
  EXPECT_TRUE(layout->blocks[3].compressed) << "(20 + 1000) * 4 < 20000";
  EXPECT_EQ(layout->blocks[1].offset, 256u * 784);
  EXPECT_EQ(layout->p_values, 256u * 4 + 256 + 30 + 20 * 4);
  EXPECT_EQ(layout->q_values, 784u * 4 + 1000 * 4);
  EXPECT_EQ(layout->blocks[3].q_offset, 784u * 4);
  EXPECT_THAT(std::string(MakeLowRankLayout({{2, 3}}, 1, 7).status().message()),
              HasSubstr("hold 6 elements, not the group's 7"));
  absl::StatusOr<LowRankLayout> none = MakeLowRankLayout({}, 4, 10);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->p_values, 10u);
  EXPECT_EQ(none->q_values, 0u);
}

TEST(PowerSgdSpecTest, TheJobFillsItsShapesAndBadSpecsAreRefusedByName) {
  std::unique_ptr<Compressor> bare = Make("powersgd");
  ASSERT_NE(bare, nullptr);
  EXPECT_TRUE(bare->sums_factor_rounds());
  EXPECT_FALSE(bare->cut_for_shards_by_default());
  Compressor::JobContext job;
  job.seed = 42;
  job.blocks = {{4, 5}, {1, 5}};
  const std::string filled = bare->SpecForJob(job);
  EXPECT_EQ(filled, "powersgd:rank=4,seed=42,shapes=4x5.5");
  EXPECT_EQ(Make(filled)->spec(), filled);
  for (const auto& [spec, says] : std::vector<std::pair<std::string, std::string>>{
           {"powersgd:rank=0", "rank"},
           {"powersgd:rank=65", "rank"},
           {"powersgd:shapes=3x", "block 0 '3x' is not RxC or N"},
           {"powersgd:shapes=0x5", "block 0 '0x5'"},
           {"powersgd:shapes=4x5..3", "block 1 ''"},
           {"powersgd:shapes=99999999999x2", "block 0"},
           {"powersgd:density=0.1", "density"},
       }) {
    absl::StatusOr<std::unique_ptr<Compressor>> made = CompressorRegistry::Default().Create(spec);
    ASSERT_FALSE(made.ok()) << spec;
    EXPECT_THAT(std::string(made.status().message()), HasSubstr(says)) << spec;
  }
}

// W workers' compressors of one group, through both rounds, the sums made
// here as a shard or an allreduce would.
struct Round {
  Update update;
  std::vector<std::vector<float>> kept;
};

Round RunRounds(std::vector<std::unique_ptr<Compressor>>& workers, const std::vector<std::vector<float>>& m) {
  Round out;
  Payload sum;
  for (size_t w = 0; w < workers.size(); ++w) {
    absl::StatusOr<Payload> p = workers[w]->Encode(m[w], EncodeContext{});
    EXPECT_TRUE(p.ok()) << p.status();
    EXPECT_TRUE(workers[0]->CheckPayload(*p).ok());
    if (w == 0) {
      sum = *p;
    } else {
      EXPECT_TRUE(MergeInto(*p, &sum).ok());
    }
  }
  absl::StatusOr<Update> first = workers[0]->Decode(sum);  // where the sum is
  EXPECT_TRUE(first.ok()) << first.status();
  Payload second_sum;
  for (size_t w = 0; w < workers.size(); ++w) {
    absl::StatusOr<Payload> q = workers[w]->low_rank()->SecondRound(*first);
    EXPECT_TRUE(q.ok()) << q.status();
    EXPECT_TRUE(workers[0]->CheckFactorRound(1, *q).ok());
    if (w == 0) {
      second_sum = *q;
    } else {
      EXPECT_TRUE(MergeInto(*q, &second_sum).ok());
    }
  }
  Update second;
  second.dense = true;
  second.dim = second_sum.values.size();
  second.values = second_sum.values;
  for (size_t w = 0; w < workers.size(); ++w) {
    absl::StatusOr<LowRankRounds::Outcome> done = workers[w]->low_rank()->Finish(*first, second);
    EXPECT_TRUE(done.ok()) << done.status();
    if (w == 0) out.update = done->update;
    EXPECT_EQ(done->update.values, out.update.values) << "every worker applies the same update";
    out.kept.push_back(done->kept);
  }
  return out;
}

TEST(PowerSgdTest, TwoRoundsOverTwoThreeAndFiveWorkersAreThePapersAlgorithm) {
  std::mt19937 rng(5);
  const std::vector<Blocks> groups = {
      {{8, 6}}, {{16, 9}, {1, 9}}, {{1, 7}, {33, 17}, {40, 40}, {1, 3}}, {{128, 64}, {64, 5}, {2, 50}}};
  for (const Blocks& blocks : groups) {
    for (uint64_t rank : {1, 2, 4}) {
      for (size_t world : {2u, 3u, 5u}) {
        const std::string spec = SpecOf(blocks, rank);
        SCOPED_TRACE(absl::StrCat(spec, ", ", world, " workers"));
        absl::StatusOr<LowRankLayout> layout = MakeLowRankLayout(blocks, rank, [&] {
          uint64_t d = 0;
          for (const auto& [r, c] : blocks) d += r * c;
          return d;
        }());
        ASSERT_TRUE(layout.ok());
        std::vector<std::unique_ptr<Compressor>> workers;
        for (size_t w = 0; w < world; ++w) workers.push_back(Make(spec));
        std::vector<std::vector<float>> m;
        for (size_t w = 0; w < world; ++w) m.push_back(Random(layout->dim, rng));
        // The warm start the workers begin from (the same on each).
        ASSERT_TRUE(workers[0]->Encode(m[0], EncodeContext{}).ok());
        const std::vector<float> q0 = workers[0]->low_rank()->SaveState();
        workers[0] = Make(spec);
        const Round got = RunRounds(workers, m);
        // The reference.
        std::vector<Matrix> md;
        for (const auto& mw : m) md.push_back(ToDouble(mw));
        const power_sgd_reference::Step want = ReferenceStep(*layout, ToDouble(q0), md);
        std::vector<double> sum_m(layout->dim, 0.0);
        for (const auto& mw : m)
          for (size_t e = 0; e < mw.size(); ++e) sum_m[e] += mw[e];
        for (size_t e = 0; e < layout->dim; ++e) {
          ASSERT_NEAR(got.update.values[e], want.update[e], 1e-4 * (1 + std::abs(want.update[e]))) << e;
          for (size_t w = 0; w < world; ++w) {
            ASSERT_NEAR(got.kept[w][e], want.kept[w][e], 1e-4 * (1 + std::abs(want.kept[w][e])))
                << "worker " << w << " at " << e;
          }
        }
        // Conservation: the update and what the workers keep add up to
        // what they encoded.
        for (size_t e = 0; e < layout->dim; ++e) {
          double total = got.update.values[e];
          for (size_t w = 0; w < world; ++w) total += got.kept[w][e];
          ASSERT_NEAR(total, sum_m[e], 1e-4 * (1 + std::abs(sum_m[e])));
        }
        // The warm start is now the summed Q, the same on every worker.
        const std::vector<float> q1 = workers[0]->low_rank()->SaveState();
        for (size_t w = 1; w < world; ++w) EXPECT_EQ(workers[w]->low_rank()->SaveState(), q1);
        const bool any_compressed =
            std::any_of(layout->blocks.begin(), layout->blocks.end(),
                        [](const LowRankLayout::Block& b) { return b.compressed; });
        if (any_compressed) {
          EXPECT_NE(q1, q0);
          ASSERT_EQ(q1.size(), layout->q_values);
          for (size_t e = 0; e < q1.size(); ++e) {
            ASSERT_NEAR(q1[e], want.next_q[e], 1e-4 * (1 + std::abs(want.next_q[e]))) << "the summed Q";
          }
        }
        else EXPECT_TRUE(q1.empty()) << "no matrix, no warm start";
      }
    }
  }
}

// A sum of rank at most r is recovered exactly by one power iteration.
TEST(PowerSgdTest, ALowRankSumIsRecovered) {
  std::mt19937 rng(9);
  const uint64_t rows = 30, cols = 20, rank = 3;
  const std::string spec = SpecOf({{rows, cols}}, rank);
  std::vector<std::unique_ptr<Compressor>> workers;
  std::vector<std::vector<float>> m;
  for (int w = 0; w < 3; ++w) {
    workers.push_back(Make(spec));
    // Each worker's matrix is a rank-1 outer product.
    const std::vector<float> u = Random(rows, rng), v = Random(cols, rng);
    std::vector<float> mw(rows * cols);
    for (uint64_t i = 0; i < rows; ++i)
      for (uint64_t j = 0; j < cols; ++j) mw[i * cols + j] = u[i] * v[j];
    m.push_back(mw);
  }
  const Round got = RunRounds(workers, m);
  for (uint64_t e = 0; e < rows * cols; ++e) {
    const double sum = m[0][e] + m[1][e] + m[2][e];
    ASSERT_NEAR(got.update.values[e], sum, 1e-4 * (1 + std::abs(sum)));
  }
}

TEST(PowerSgdTest, TheWarmStartIsSavedAndRestoredAndBadStatesAreRefused) {
  std::mt19937 rng(3);
  const Blocks blocks = {{10, 8}, {1, 4}};
  const std::string spec = SpecOf(blocks, 2);
  std::vector<std::unique_ptr<Compressor>> workers;
  workers.push_back(Make(spec));
  workers.push_back(Make(spec));
  const std::vector<std::vector<float>> m = {Random(84, rng), Random(84, rng)};
  RunRounds(workers, m);
  const std::vector<float> saved = workers[0]->low_rank()->SaveState();
  ASSERT_EQ(saved.size(), 8u * 2);
  std::vector<std::unique_ptr<Compressor>> resumed;
  resumed.push_back(Make(spec));
  resumed.push_back(Make(spec));
  for (auto& c : resumed) ASSERT_TRUE(c->low_rank()->RestoreState(saved).ok());
  // The next step from the restored warm start is the uninterrupted one.
  const std::vector<std::vector<float>> next = {Random(84, rng), Random(84, rng)};
  EXPECT_EQ(RunRounds(resumed, next).update.values, RunRounds(workers, next).update.values);
  LowRankRounds* low_rank = resumed[0]->low_rank();
  EXPECT_THAT(std::string(low_rank->RestoreState(std::vector<float>(5, 1.0f)).message()),
              HasSubstr("a saved warm start of 5 values; the group's is 16"));
  std::vector<float> bad = saved;
  bad[3] = std::nanf("");
  EXPECT_THAT(std::string(low_rank->RestoreState(bad).message()), HasSubstr("value 3 is not finite"));
  EXPECT_EQ(low_rank->SaveState(), workers[0]->low_rank()->SaveState()) << "a refusal changes nothing";
}

TEST(PowerSgdTest, PayloadsThatDoNotFitAreRefusedWhereverTheyArrive) {
  std::unique_ptr<Compressor> c = Make(SpecOf({{10, 8}, {1, 4}}, 2));
  Payload p;
  p.kind = PayloadKind::kCandidateValues;
  p.dim = 84;
  p.values.assign(24, 1.0f);  // round 0: 10 * 2 + 4
  EXPECT_TRUE(c->CheckPayload(p).ok());
  p.values.assign(23, 1.0f);
  EXPECT_THAT(std::string(c->CheckPayload(p).message()), HasSubstr("round 0 carries 24 values"));
  p.dim = 85;
  EXPECT_THAT(std::string(c->CheckPayload(p).message()), HasSubstr("the shapes hold 84 elements"));
  Payload q;
  q.kind = PayloadKind::kCandidateValues;
  q.dim = 84;
  q.values.assign(16, 1.0f);
  EXPECT_TRUE(c->CheckFactorRound(1, q).ok());
  q.values.assign(17, 1.0f);
  EXPECT_THAT(std::string(c->CheckFactorRound(1, q).message()), HasSubstr("round 1 carries 16 values"));
  EXPECT_FALSE(c->CheckFactorRound(2, q).ok());
  q.kind = PayloadKind::kDense;
  EXPECT_THAT(std::string(c->CheckFactorRound(1, q).message()), HasSubstr("takes factor values, not a dense"));
  // A method without factor rounds refuses them.
  EXPECT_FALSE(Make("dense")->CheckFactorRound(1, q).ok());
  // Rounds out of order on a worker.
  EXPECT_THAT(std::string(c->low_rank()->SecondRound(Update{}).status().message()), HasSubstr("before any Encode"));
  ASSERT_TRUE(c->Encode(std::vector<float>(84, 1.0f), EncodeContext{}).ok());
  Update wrong;
  wrong.dense = true;
  wrong.values.assign(3, 0.0f);
  EXPECT_THAT(std::string(c->low_rank()->SecondRound(wrong).status().message()), HasSubstr("holds 3 values"));
  EXPECT_FALSE(c->low_rank()->Finish(wrong, wrong).ok());
}

// A group of vectors only sends everything whole and has no second factors.
TEST(PowerSgdTest, AGroupWithoutMatricesTravelsWhole) {
  std::vector<std::unique_ptr<Compressor>> workers;
  workers.push_back(Make(SpecOf({{1, 5}, {3, 2}}, 4)));  // (3 + 2) * 4 > 6
  workers.push_back(Make(SpecOf({{1, 5}, {3, 2}}, 4)));
  EXPECT_THAT(workers[0]->FitWarning(11, 2), HasSubstr("travels whole"));
  const std::vector<std::vector<float>> m = {std::vector<float>(11, 1.0f), std::vector<float>(11, 2.0f)};
  const Round got = RunRounds(workers, m);
  EXPECT_EQ(got.update.values, std::vector<float>(11, 3.0f));
  EXPECT_EQ(got.kept[0], std::vector<float>(11, 0.0f));
}

}  // namespace
}  // namespace sketchfuse
