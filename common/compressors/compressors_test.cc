// Every built-in compressor on random gradients of many sizes: payload
// validity, what each selects against a direct computation, linearity where
// claimed, and refusal of bad input.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/bf16.h"
#include "common/compressor_registry.h"
#include "common/count_sketch.h"
#include "common/sketch_hash.h"
#include "common/topk.h"
#include "common/error_feedback.h"
#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

std::vector<float> HeavyTailed(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::student_t_distribution<float> t(2.5f);
  std::vector<float> x(n);
  for (float& v : x) v = t(rng);
  return x;
}

std::unique_ptr<Compressor> Make(absl::string_view spec) {
  absl::StatusOr<std::unique_ptr<Compressor>> c = CompressorRegistry::Default().Create(spec);
  EXPECT_TRUE(c.ok()) << spec << ": " << c.status();
  return *std::move(c);
}

class EveryCompressorTest
    : public ::testing::TestWithParam<std::tuple<std::string, size_t>> {};

TEST_P(EveryCompressorTest, EncodesValidPayloadsAndDecodesThem) {
  const auto& [spec, n] = GetParam();
  std::unique_ptr<Compressor> c = Make(spec);
  const std::vector<float> g = HeavyTailed(n, static_cast<uint32_t>(n));
  const std::vector<float> w = HeavyTailed(n, static_cast<uint32_t>(n + 1));
  EncodeContext context{3, w};
  absl::StatusOr<Payload> p = c->Encode(g, context);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->kind, c->payload_kind());
  EXPECT_EQ(p->dim, n);
  ASSERT_TRUE(ValidatePayload(*p).ok()) << ValidatePayload(*p);
  absl::StatusOr<Update> u = c->Decode(*p);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->dim, n);
  if (!u->dense) {
    EXPECT_TRUE(std::is_sorted(u->indices.begin(), u->indices.end()));
    EXPECT_EQ(u->indices.size(), u->values.size());
    EXPECT_GE(u->indices.size(), 1u);
  }
  // DecodeOwned gives what Decode gives, with and without the decorators.
  const std::unique_ptr<Compressor> decorated = WithErrorFeedback(Make(spec));
  for (const Compressor* decoder : {c.get(), decorated.get()}) {
    absl::StatusOr<Update> owned = decoder->DecodeOwned(*p);
    ASSERT_TRUE(owned.ok()) << owned.status();
    EXPECT_EQ(owned->dense, u->dense);
    EXPECT_EQ(owned->dim, u->dim);
    EXPECT_EQ(owned->indices, u->indices);
    EXPECT_EQ(owned->values, u->values);
  }
  // A server takes the payload as one worker's push of its step.
  EXPECT_TRUE(c->CheckPayloadForStep(*p, 3).ok()) << c->CheckPayloadForStep(*p, 3);
  EXPECT_TRUE(decorated->CheckPayloadForStep(*p, 3).ok());
  // Encoding is deterministic for the same step.
  absl::StatusOr<Payload> again = c->Encode(g, context);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->indices, p->indices);
  EXPECT_EQ(again->values, p->values);
}

TEST_P(EveryCompressorTest, RefusesEmptyGroups) {
  std::unique_ptr<Compressor> c = Make(std::get<0>(GetParam()));
  EXPECT_EQ(c->Encode({}, EncodeContext{}).status().code(), absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(
    Specs, EveryCompressorTest,
    ::testing::Combine(::testing::Values("dense", "topk:density=0.01", "randomk:density=0.01",
                                         "threshold:density=0.01", "importance:density=0.01",
                                         "count_sketch:density=0.01"),
                       ::testing::Values(1, 2, 999, 10007, 300001)));

// A pushed sparse payload holds at most what its compressor's Encode sends
// (k; the threshold's at most 2k): a worker pushing every coordinate would
// make the union every worker receives larger than dense's. Aggregates (a
// union of W payloads) are still decoded.
TEST(SparseCompressorTest, APushedPayloadHoldsAtMostWhatEncodeSends) {
  const size_t n = 1000;
  const std::vector<float> g = HeavyTailed(n, 5);
  for (const auto& [spec, most] : std::vector<std::pair<std::string, size_t>>{
           {"topk:k=5", 5}, {"randomk:k=5", 5}, {"importance:k=5", 5}, {"threshold:k=5", 10}}) {
    SCOPED_TRACE(spec);
    for (const std::unique_ptr<Compressor>& c : {Make(spec), WithErrorFeedback(Make(spec))}) {
      Payload within;
      within.kind = PayloadKind::kSparse;
      within.dim = n;
      for (uint32_t i = 0; i < most; ++i) {
        within.indices.push_back(3 * i);
        within.values.push_back(g[3 * i]);
      }
      EXPECT_TRUE(c->CheckPayloadForStep(within, 0).ok());
      Payload over = within;
      over.indices.push_back(3 * most);
      over.values.push_back(1);
      const absl::Status refused = c->CheckPayloadForStep(over, 0);
      EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(refused.message().find(absl::StrCat("sends at most ", most, " entries of a group of 1000 elements; "
                                                    "the payload has ", most + 1)),
                std::string::npos)
          << refused;
      EXPECT_TRUE(c->Decode(over).ok());  // an aggregate of several workers' payloads
    }
  }
}

TEST(TopKCompressorTest, SelectsTheExactTopK) {
  const std::vector<float> g = HeavyTailed(100000, 1);
  absl::StatusOr<Payload> p = Make("topk:k=100")->Encode(g, {});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->indices, TopKIndicesReference(g, 100));
  for (size_t i = 0; i < p->indices.size(); ++i) EXPECT_EQ(p->values[i], g[p->indices[i]]);
}

TEST(RandomKCompressorTest, WorkersAgreeOnIndicesSoPayloadsAreLinear) {
  std::unique_ptr<Compressor> a = Make("randomk:k=500,seed=9"), b = Make("randomk:k=500,seed=9");
  const std::vector<float> x = HeavyTailed(50000, 2), y = HeavyTailed(50000, 3);
  std::vector<float> sum(x.size());
  for (size_t i = 0; i < x.size(); ++i) sum[i] = x[i] + y[i];
  Payload px = *a->Encode(x, {7, {}}), py = *b->Encode(y, {7, {}}), ps = *a->Encode(sum, {7, {}});
  EXPECT_TRUE(a->linear());
  EXPECT_EQ(px.indices.size(), 500u);
  EXPECT_EQ(std::set<uint32_t>(px.indices.begin(), px.indices.end()).size(), 500u);
  EXPECT_EQ(px.indices, py.indices);
  ASSERT_TRUE(MergeInto(py, &px).ok());
  EXPECT_EQ(px.indices, ps.indices);
  for (size_t i = 0; i < px.values.size(); ++i) EXPECT_FLOAT_EQ(px.values[i], ps.values[i]);
  // Another step draws other indices.
  EXPECT_NE(a->Encode(x, {8, {}})->indices, a->Encode(x, {7, {}})->indices);
}

TEST(ThresholdCompressorTest, SendsAboutKOfTheLargest) {
  const std::vector<float> g = HeavyTailed(1000000, 4);
  Payload p = *Make("threshold:k=1000,sample=0.01")->Encode(g, {});
  EXPECT_GT(p.indices.size(), 500u);
  EXPECT_LE(p.indices.size(), 2000u);
  // Everything sent is at least as large as everything not sent.
  float min_sent = INFINITY;
  for (float v : p.values) min_sent = std::min(min_sent, std::abs(v));
  std::set<uint32_t> sent(p.indices.begin(), p.indices.end());
  for (size_t i = 0; i < g.size(); ++i) {
    if (!sent.count(i)) {
      ASSERT_LE(std::abs(g[i]), min_sent);
    }
  }
}

TEST(ImportanceCompressorTest, RanksByGradientOverParameter) {
  // Equal gradients; the smallest parameters make the most important entries.
  std::vector<float> g(1000, 1.0f), w(1000);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 1.0f + static_cast<float>((i * 7919) % 1000);
  Payload p = *Make("importance:k=5")->Encode(g, {0, w});
  std::vector<uint32_t> expected;
  for (uint32_t i = 0; i < 1000; ++i) if (w[i] <= 5.0f) expected.push_back(i);
  EXPECT_EQ(p.indices, expected);
  absl::Status missing = Make("importance:k=5")->Encode(g, {}).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(missing.message().find("parameter values"), std::string::npos);
}

TEST(CountSketchCompressorTest, AggregateOfWorkersDecodesTheGlobalHeavyHitters) {
  // Four workers each hold noise plus a share of 50 planted coordinates; the
  // merged sketch's decode finds all 50 with values near their sums.
  const size_t n = 200000;
  std::mt19937 rng(5);
  std::vector<uint32_t> planted;
  while (planted.size() < 50) {
    const uint32_t i = rng() % n;
    if (std::find(planted.begin(), planted.end(), i) == planted.end()) planted.push_back(i);
  }
  std::sort(planted.begin(), planted.end());
  std::unique_ptr<Compressor> c = Make("count_sketch:method=estimate,k=100,width=20,seed=3");
  Payload aggregate;
  std::vector<double> noise_sum(n, 0.0);
  for (int w = 0; w < 4; ++w) {
    std::vector<float> g = HeavyTailed(n, 100 + w);
    for (float& v : g) v *= 0.01f;
    for (size_t i = 0; i < n; ++i) noise_sum[i] += g[i];
    for (uint32_t i : planted) g[i] += 2.5f;
    Payload p = *c->Encode(g, {});
    if (w == 0) aggregate = std::move(p);
    else ASSERT_TRUE(MergeInto(p, &aggregate).ok());
  }
  Update u = *c->Decode(aggregate);
  ASSERT_EQ(u.indices.size(), 100u);
  // One row's error has standard deviation ||noise|| / sqrt(cols); the median
  // of 5 rows stays within 3 of them except with tiny probability.
  double noise_norm = 0;
  for (double v : noise_sum) noise_norm += v * v;
  const double tolerance = 3 * std::sqrt(noise_norm / aggregate.sketch.cols);
  for (uint32_t i : planted) {
    auto it = std::lower_bound(u.indices.begin(), u.indices.end(), i);
    ASSERT_TRUE(it != u.indices.end() && *it == i) << "missed " << i;
    EXPECT_NEAR(u.values[it - u.indices.begin()], 10.0f, tolerance);
  }
}

TEST(CountSketchCompressorTest, RefusesForeignPayloads) {
  std::unique_ptr<Compressor> c = Make("count_sketch:method=estimate,k=10");
  Payload p = *Make("count_sketch:method=estimate,k=10,seed=99")->Encode(HeavyTailed(1000, 1), {});
  absl::Status s = c->Decode(p).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("does not match"), std::string::npos) << s;
  Payload sparse = *Make("topk:k=10")->Encode(HeavyTailed(1000, 1), {});
  EXPECT_EQ(c->Decode(sparse).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Make("dense")->Decode(sparse).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Make("topk")->Decode(p).status().code(), absl::StatusCode::kInvalidArgument);
}

// method=peel: each worker inserts its k largest entries under the step's
// seed, and the decode of the merged sketches returns exactly the sums of
// what was inserted (where supports overlap too), never an estimate.
TEST(CountSketchCompressorTest, PeelReturnsTheExactSumsOfWhatWorkersInserted) {
  const size_t n = 100000;
  const uint64_t k = 250;  // per worker; cols = 4 * k, so a quarter load for 4 workers
  std::unique_ptr<Compressor> c = Make("count_sketch:method=peel,k=250,rows=4,width=4,seed=3");
  const EncodeContext step{17, {}};
  Payload aggregate;
  std::vector<double> inserted_sum(n, 0.0);
  for (int w = 0; w < 4; ++w) {
    std::vector<float> g = HeavyTailed(n, 300 + w);
    for (size_t i = 0; i < 100; ++i) g[i] = 50.0f + i;  // shared by every worker's top k
    Payload p = *c->Encode(g, step);
    ASSERT_TRUE(p.inserted.has_value());
    ASSERT_EQ(p.inserted->size(), k);
    EXPECT_EQ(*p.inserted, TopKIndices(g, k));
    EXPECT_EQ(p.sketch.seed, StepSeed(3, 17));
    for (uint32_t i : *p.inserted) inserted_sum[i] += g[i];
    if (w == 0) aggregate = std::move(p);
    else ASSERT_TRUE(MergeInto(p, &aggregate).ok());
  }
  const Update u = *c->Decode(aggregate);
  size_t nonzeros = 0;
  for (double v : inserted_sum) nonzeros += v != 0.0;
  ASSERT_GE(u.indices.size(), nonzeros * 97 / 100);
  for (size_t j = 0; j < u.indices.size(); ++j) {
    const double truth = inserted_sum[u.indices[j]];
    ASSERT_NE(truth, 0.0) << "returned coordinate " << u.indices[j] << ", which nobody inserted";
    EXPECT_NEAR(u.values[j], truth, 1e-5 * std::fabs(truth)) << "coordinate " << u.indices[j];
  }
}

// Every step hashes anew: a server refuses a sketch hashed for another step
// (a worker replaying a stale payload into a new round) with the seeds named.
TEST(CountSketchCompressorTest, PeelPayloadsBelongToTheirStep) {
  std::unique_ptr<Compressor> c = Make("count_sketch:method=peel,k=10,seed=5");
  const Payload p = *c->Encode(HeavyTailed(1000, 1), EncodeContext{3, {}});
  EXPECT_TRUE(c->CheckPayloadForStep(p, 3).ok());
  const absl::Status other = c->CheckPayloadForStep(p, 4);
  EXPECT_EQ(other.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(other.message().find("is not the seed of step 4"), std::string::npos) << other;
  EXPECT_NE(c->Encode(HeavyTailed(1000, 1), EncodeContext{4, {}})->sketch.seed, p.sketch.seed);
  // The estimate method keeps one seed for every step.
  std::unique_ptr<Compressor> fixed = Make("count_sketch:method=estimate,k=10,seed=5");
  const Payload q = *fixed->Encode(HeavyTailed(1000, 1), EncodeContext{3, {}});
  EXPECT_FALSE(q.inserted.has_value());
  EXPECT_TRUE(fixed->CheckPayloadForStep(q, 4).ok());
}

// Without width or cols, a peel table is sized for the workers whose
// selections it sums (common/peel_capacity.h): 4 cells per nonzero of
// workers * k, at least 512 cells, never more than the group's union needs.
TEST(CountSketchCompressorTest, PeelTableFollowsTheWorkers) {
  const uint64_t dim = 235146, k = 1470;  // the MLP's group at density 0.00625
  for (uint32_t workers : {1u, 2u, 4u, 8u, 16u, 64u}) {
    std::unique_ptr<Compressor> c = Make(absl::StrCat("count_sketch:method=peel,k=1470,rows=4,workers=", workers));
    const SketchShape shape = c->SketchLayoutFor(dim)->shape;
    EXPECT_EQ(shape.rows, 4u);
    EXPECT_EQ(shape.cols, std::min<uint64_t>(workers * k, dim)) << workers << " workers";
  }
  // The default is four workers: the shape of the old default width=4.
  EXPECT_EQ(Make("count_sketch:method=peel,k=1470,rows=4")->SketchLayoutFor(dim)->shape.cols, 4 * k);
  EXPECT_EQ(Make("count_sketch:method=peel,k=1470,rows=4,width=4")->SketchLayoutFor(dim)->shape.cols, 4 * k);
  // Eight rows hold the same cells in half the columns; a tiny group gets 512 cells.
  EXPECT_EQ(Make("count_sketch:method=peel,k=1470,rows=8,workers=8")->SketchLayoutFor(dim)->shape.cols, 4 * k);
  EXPECT_EQ(Make("count_sketch:method=peel,k=2,rows=4,workers=4")->SketchLayoutFor(100)->shape.cols, 128u);
}

// The job fills in its seed and world size; an explicit shape is the user's.
TEST(CountSketchCompressorTest, SpecForJobFillsWhatTheSpecLeavesToTheJob) {
  const Compressor::JobContext job{16, 42, 0.5};
  EXPECT_EQ(Make("count_sketch:method=peel,density=0.00625,rows=4")->SpecForJob(job),
            "count_sketch:method=peel,density=0.00625,rows=4,workers=16,seed=42");
  EXPECT_EQ(Make("count_sketch:method=peel,density=0.00625,rows=4,workers=4,seed=7")->SpecForJob(job),
            "count_sketch:method=peel,density=0.00625,rows=4,workers=16,seed=42");
  EXPECT_EQ(Make("count_sketch:method=peel,density=0.00625,rows=4,width=4")->SpecForJob(job),
            "count_sketch:method=peel,density=0.00625,rows=4,width=4,seed=42");
  EXPECT_EQ(Make("count_sketch:method=peel,density=0.00625,rows=4,cols=999")->SpecForJob(job),
            "count_sketch:method=peel,density=0.00625,rows=4,cols=999,seed=42");
  EXPECT_EQ(Make("count_sketch:method=fetchsgd,density=0.01,rows=1,width=5")->SpecForJob(job),
            "count_sketch:method=fetchsgd,density=0.01,rows=1,width=5,seed=42,momentum=0.5");
  // Compressors that take nothing from the job keep their spec.
  EXPECT_EQ(Make("topk:density=0.01")->SpecForJob(job), Make("topk:density=0.01")->spec());
  // The filled-in spec builds the same compressor on every process.
  const std::string filled = Make("count_sketch:method=peel,density=0.00625,rows=4")->SpecForJob(job);
  EXPECT_EQ(Make(filled)->spec(), filled);
}

// A fixed shape too small for the job's workers is named, with the share of
// the mass the peel is expected to recover; a table larger than the group
// too. A table sized for the job says nothing.
TEST(CountSketchCompressorTest, FitWarningNamesAShapeTooSmallForTheWorkers) {
  const uint64_t dim = 235146;
  EXPECT_EQ(Make("count_sketch:method=peel,density=0.00625,rows=4,workers=16")->FitWarning(dim, 16), "");
  EXPECT_EQ(Make("count_sketch:method=peel,density=0.00625,rows=4,width=4")->FitWarning(dim, 4), "");
  const std::string small = Make("count_sketch:method=peel,density=0.00625,rows=4,width=4")->FitWarning(dim, 16);
  EXPECT_NE(small.find("width=4"), std::string::npos) << small;
  EXPECT_NE(small.find("16 workers"), std::string::npos) << small;
  EXPECT_NE(small.find("expected to recover"), std::string::npos) << small;
  EXPECT_NE(small.find("4 x 23520"), std::string::npos) << small;  // the shape the rule would give
  const std::string sized_for_4 = Make("count_sketch:method=peel,density=0.00625,rows=4,workers=4")->FitWarning(dim, 8);
  EXPECT_NE(sized_for_4.find("expected to recover"), std::string::npos) << sized_for_4;
  const std::string huge = Make("count_sketch:method=peel,density=0.00625,rows=4,workers=64")->FitWarning(dim, 64);
  EXPECT_NE(huge.find("as large as the group"), std::string::npos) << huge;
  EXPECT_EQ(Make("count_sketch:method=estimate,density=0.01,rows=5,width=10")->FitWarning(dim, 64), "");
  // A fixed-size candidates table: no warning at any world size while it
  // and its candidates are smaller than the group; a warning naming the
  // sizes once they are not.
  EXPECT_EQ(Make("count_sketch:method=candidates,density=0.025,rows=1,width=2")->FitWarning(dim, 256), "");
  const std::string dense_sized = Make("count_sketch:method=candidates,density=0.25,rows=2,width=2")->FitWarning(dim, 4);
  EXPECT_NE(dense_sized.find("as many values as the group"), std::string::npos) << dense_sized;
  // The registry's shape at 10x (30 elements a column) says nothing; at 100x
  // (300 a column: the shape that collapsed) it is named, with the count.
  EXPECT_EQ(Make("count_sketch:method=candidates,density=0.0333,rows=1,width=1,candidates=2")->FitWarning(dim, 64), "");
  const std::string mixed = Make("count_sketch:method=candidates,density=0.00333,rows=1,width=1,candidates=2")
                                ->FitWarning(dim, 64);
  EXPECT_NE(mixed.find("density=0.00333"), std::string::npos) << mixed;
  EXPECT_NE(mixed.find("mixes 300 of the group's 235146 elements"), std::string::npos) << mixed;
  EXPECT_NE(mixed.find("topk_ps"), std::string::npos) << mixed;
  // Its width buys the columns back.
  EXPECT_EQ(Make("count_sketch:method=candidates,density=0.00333,rows=1,width=4,candidates=2")->FitWarning(dim, 64), "");
}

// method=candidates: the table's shape does not depend on the workers, the
// seed is the job's (hash=job) or follows the step (hash=step), and the
// decode returns candidates * k coordinates: the top estimates of the summed
// table.
TEST(CountSketchCompressorTest, CandidatesDecodeTheTopEstimatesOfAFixedTable) {
  const uint64_t dim = 10000;
  for (const std::string hash : {"job", "step"}) {
    SCOPED_TRACE(hash);
    std::unique_ptr<Compressor> c =
        Make("count_sketch:method=candidates,k=50,rows=1,width=2,candidates=3,seed=7,hash=" + hash);
    EXPECT_EQ(c->spec(), "count_sketch:method=candidates,k=50,rows=1,width=2,seed=7,candidates=3,hash=" + hash);
    Compressor::JobContext job;
    job.world_size = 64;
    job.seed = 11;
    EXPECT_EQ(c->SpecForJob(job),
              "count_sketch:method=candidates,k=50,rows=1,width=2,seed=11,candidates=3,hash=" + hash);
    // What a GPU worker encodes and decodes with (worker/gpu/device_group_state.h):
    // the whole group in this table, hashed as the spec says, and 3k
    // candidates decoded.
    const std::optional<Compressor::SketchLayout> layout = c->SketchLayoutFor(dim);
    ASSERT_TRUE(layout.has_value());
    EXPECT_EQ(layout->method, Compressor::SketchLayout::Method::kCandidates);
    EXPECT_EQ(layout->heavy_hitters, 150u);
    EXPECT_EQ(layout->shape.rows, 1u);
    EXPECT_EQ(layout->shape.cols, 100u);
    EXPECT_EQ(layout->seed, 7u);
    EXPECT_EQ(layout->hash_per_step, hash == "step");
    EXPECT_FALSE(layout->table_bf16);
    // Never more candidates than the group has elements.
    EXPECT_EQ(c->SketchLayoutFor(120)->heavy_hitters, 120u);
    const std::vector<float> x = HeavyTailed(dim, 4);
    EncodeContext step3;
    step3.step = 3;
    const Payload p = *c->Encode(x, step3);
    EXPECT_EQ(p.sketch.rows, 1u);
    EXPECT_EQ(p.sketch.cols, 100u);
    EXPECT_EQ(p.sketch.seed, hash == "step" ? StepSeed(7, 3) : 7u);
    EXPECT_TRUE(c->CheckPayloadForStep(p, 3).ok());
    // A step-hashed table belongs to its step only; a job-hashed one to any.
    EXPECT_EQ(c->CheckPayloadForStep(p, 4).ok(), hash == "job");
    const Update candidates = *c->Decode(p);
    ASSERT_EQ(candidates.indices.size(), 150u);
    const SparseEntries top = SketchView(p.sketch, p.values.data()).HeavyHitters(dim, 150);
    EXPECT_EQ(candidates.indices, top.indices);
  }
  EXPECT_EQ(Make("count_sketch:method=candidates,k=5,rows=1,width=2")->spec(),
            "count_sketch:method=candidates,k=5,rows=1,width=2,seed=1,candidates=2,hash=job");
}

// table=bf16: the same table rounded to bfloat16 cell by cell (so the push
// codec sends it at 2 bytes a cell), and the candidates its estimates rank
// first; without it, float32 cells.
TEST(CountSketchCompressorTest, ABf16TableIsTheTableRoundedCellByCell) {
  const uint64_t dim = 20000;
  const std::vector<float> x = HeavyTailed(dim, 9);
  std::unique_ptr<Compressor> f32 = Make("count_sketch:method=candidates,k=40,rows=1,width=1");
  std::unique_ptr<Compressor> bf16 = Make("count_sketch:method=candidates,k=40,rows=1,width=1,table=bf16");
  EXPECT_EQ(bf16->spec(), "count_sketch:method=candidates,k=40,rows=1,width=1,seed=1,candidates=2,hash=job,table=bf16");
  EXPECT_EQ(Make(bf16->spec())->spec(), bf16->spec());
  const Payload exact = *f32->Encode(x, {});
  const Payload rounded = *bf16->Encode(x, {});
  EXPECT_FALSE(HoldsExactlyAsBf16(exact.values));
  EXPECT_TRUE(HoldsExactlyAsBf16(rounded.values));
  ASSERT_EQ(rounded.values.size(), exact.values.size());
  for (size_t i = 0; i < exact.values.size(); ++i) {
    EXPECT_EQ(rounded.values[i], Bf16ToFloat(FloatToBf16(exact.values[i]))) << i;
  }
  const Update candidates = *bf16->Decode(rounded);
  EXPECT_EQ(candidates.indices, SketchView(rounded.sketch, rounded.values.data()).HeavyHitters(dim, 80).indices);
  EXPECT_TRUE(bf16->SketchLayoutFor(dim)->table_bf16);
  EXPECT_FALSE(f32->SketchLayoutFor(dim)->table_bf16);
}

TEST(CountSketchCompressorTest, PeelNeedsTwoRowsAndAKnownMethod) {
  absl::StatusOr<std::unique_ptr<Compressor>> one_row = CompressorRegistry::Default().Create("count_sketch:rows=1");
  EXPECT_EQ(one_row.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(one_row.status().message().find("method=peel needs at least 2 rows"), std::string::npos)
      << one_row.status();
  EXPECT_TRUE(CompressorRegistry::Default().Create("count_sketch:method=estimate,rows=1").ok());
  absl::StatusOr<std::unique_ptr<Compressor>> unknown = CompressorRegistry::Default().Create("count_sketch:method=magic");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("method='magic' is not one of peel, estimate"), std::string::npos)
      << unknown.status();
}

}  // namespace
}  // namespace sketchfuse
