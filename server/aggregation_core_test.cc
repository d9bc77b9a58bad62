// The aggregation core without any socket: sums against direct computation,
// sketch decode against the CPU decode of the summed sketch, idempotency,
// cached answers, deadlines naming missing workers, refusal of bad requests
// with state unchanged, Top-k PS re-selection, and many threads at once.
#include "server/aggregation_core.h"

#include <algorithm>
#include <cmath>

#include <atomic>
#include <deque>
#include <functional>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include <mutex>
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/compressor_registry.h"
#include "common/error_feedback.h"
#include "common/fetchsgd_state.h"
#include "common/test_vectors.h"
#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000000);

Payload Encode(absl::string_view spec, const std::vector<float>& g, uint64_t step = 0) {
  return *(*CompressorRegistry::Default().Create(spec))->Encode(g, EncodeContext{step, {}});
}

// Records what a push's callback received.
struct Answer {
  std::mutex mu;
  bool called = false;
  int calls = 0;
  absl::StatusOr<RoundResult> result = absl::UnknownError("not called");

  PushCallback Callback() {
    return [this](absl::StatusOr<RoundResult> r) {
      std::lock_guard<std::mutex> lock(mu);
      called = true;
      ++calls;
      result = std::move(r);
    };
  }
};

std::unique_ptr<AggregationCore> MakeCore(uint32_t workers, std::vector<GroupSpec> groups,
                                          absl::Duration deadline = absl::Seconds(10),
                                          const std::function<void(AggregationConfig&)>& adjust = {}) {
  AggregationConfig config;
  config.job = "job";
  config.world_size = workers;
  config.groups = std::move(groups);
  config.round_deadline = deadline;
  config.finished_rounds_kept = 2;
  if (adjust) adjust(config);
  absl::StatusOr<std::unique_ptr<AggregationCore>> core = AggregationCore::Create(config);
  EXPECT_TRUE(core.ok()) << core.status();
  return *std::move(core);
}

// A core of two workers and one group that records each answer into
// `sink`, or fails to ("disk full") while *fail_record is true.
std::unique_ptr<AggregationCore> RecordingCore(uint32_t group, uint64_t dim, const std::string& spec,
                                               std::vector<KeptAnswer>* sink, const bool* fail_record = nullptr) {
  AggregationConfig config;
  config.job = "job";
  config.world_size = 2;
  config.groups = {{group, dim, spec}};
  config.round_deadline = absl::Seconds(10);
  config.record_answer = [sink, fail_record](const KeptAnswer& a) {
    if (fail_record != nullptr && *fail_record) return absl::InternalError("disk full");
    sink->push_back(a);
    return absl::OkStatus();
  };
  return *AggregationCore::Create(config);
}

TEST(AggregationCoreTest, AShardWithoutGroupsRefusesEveryPush) {
  std::unique_ptr<AggregationCore> core = MakeCore(2, {});
  Answer answer;
  core->Push({"job", 0, 0}, 0, Encode("dense", {1, 2}), kT0, answer.Callback());
  ASSERT_TRUE(answer.called);
  EXPECT_EQ(answer.result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(core->stats().rounds_open, 0u);
}

TEST(AggregationCoreTest, SumsInWorkerOrderWhateverTheOrderOfArrival) {
  // In float, (1e8 + 1) - 1e8 is 0 but (1e8 - 1e8) + 1 is 1: the worker order.
  std::unique_ptr<AggregationCore> core = MakeCore(3, {{0, 1, "dense", 0}});
  Answer a, b, c;
  core->Push({"job", 0, 0}, 0, Encode("dense", {1e8f}), kT0, a.Callback());
  core->Push({"job", 0, 0}, 2, Encode("dense", {1.0f}), kT0, c.Callback());
  core->Push({"job", 0, 0}, 1, Encode("dense", {-1e8f}), kT0, b.Callback());
  ASSERT_TRUE(a.result.ok()) << a.result.status();
  EXPECT_EQ(a.result->update->values, std::vector<float>({1.0f}));
}

TEST(AggregationCoreTest, DenseRoundAnswersEveryWorkerWithTheSum) {
  const size_t n = 1000;
  auto core = MakeCore(4, {{0, n, "dense"}});
  std::vector<float> expected(n, 0.0f);
  Answer answers[4];
  for (uint32_t w = 0; w < 4; ++w) {
    const std::vector<float> g = GaussianVector(n, w);
    for (size_t i = 0; i < n; ++i) expected[i] += g[i];
    core->Push({"job", 7, 0}, w, Encode("dense", g), kT0, answers[w].Callback());
    EXPECT_EQ(answers[w].called, w == 3) << "worker " << w;
  }
  for (Answer& a : answers) {
    ASSERT_TRUE(a.result.ok()) << a.result.status();
    EXPECT_TRUE(a.result->update->dense);
    EXPECT_EQ(a.result->update->values, expected);  // same additions, same order
    EXPECT_EQ(a.result->contributors, 4u);
    EXPECT_EQ(a.result->update, answers[0].result->update);  // one shared answer
  }
  const AggregationCore::Stats stats = core->stats();
  EXPECT_EQ(stats.rounds_completed, 1u);
  EXPECT_EQ(stats.rounds_open, 0u);
  EXPECT_EQ(stats.bytes_in, 4u * n * 4);
}

TEST(AggregationCoreTest, SketchRoundDecodesTheSummedSketch) {
  const size_t n = 50000;
  const std::string spec = "count_sketch:k=100,seed=5";
  auto core = MakeCore(3, {{2, n, spec}});
  auto reference = *CompressorRegistry::Default().Create(spec);
  Payload summed;
  Answer answers[3];
  for (uint32_t w = 0; w < 3; ++w) {
    Payload p = Encode(spec, GaussianVector(n, 10 + w), 1);
    if (w == 0) summed = p;
    else ASSERT_TRUE(MergeInto(p, &summed).ok());
    core->Push({"job", 1, 2}, w, std::move(p), kT0, answers[w].Callback());
  }
  const Update expected = *reference->Decode(summed);
  ASSERT_TRUE(answers[2].result.ok()) << answers[2].result.status();
  EXPECT_EQ(answers[2].result->update->indices, expected.indices);
  EXPECT_EQ(answers[2].result->update->values, expected.values);
}

// A worker's second-round push: its values at the candidates, in their
// order, without the indices.
Payload Exact(const std::vector<uint32_t>& indices, const std::vector<float>& g) {
  Payload p;
  p.kind = PayloadKind::kCandidateValues;
  p.dim = g.size();
  for (uint32_t i : indices) p.values.push_back(g[i]);
  return p;
}

TEST(AggregationCoreTest, SecondRoundSumsTheExactValuesAtTheCandidates) {
  const size_t n = 20000;
  const std::string spec = "count_sketch:method=estimate,k=50,rows=1,seed=3";
  GroupSpec group{4, n, spec};
  group.rounds = 2;
  auto core = MakeCore(3, {group});
  std::vector<std::vector<float>> grads;
  Answer first[3];
  for (uint32_t w = 0; w < 3; ++w) {
    grads.push_back(GaussianVector(n, 40 + w));
    core->Push({"job", 7, 4}, w, Encode(spec, grads[w]), kT0, first[w].Callback());
  }
  ASSERT_TRUE(first[0].result.ok()) << first[0].result.status();
  const std::vector<uint32_t> candidates = first[0].result->update->indices;
  ASSERT_EQ(candidates.size(), 50u);
  // The first answer lists the candidates without their estimates: the
  // workers use only the indices.
  EXPECT_TRUE(IsCandidateList(*first[0].result->update));
  EXPECT_TRUE(first[0].result->update->values.empty());

  // Refused, with nothing changed: a value too few, the values with their
  // indices (a sparse payload), a dense payload, and a second round of a
  // step whose first round this shard never answered.
  Answer wrong, sparse, dense, early;
  const std::vector<uint32_t> fewer(candidates.begin(), candidates.end() - 1);
  core->Push({"job", 7, 4, 1}, 0, Exact(fewer, grads[0]), kT0, wrong.Callback());
  EXPECT_EQ(wrong.result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.result.status().message().find("one value for each of the 50 candidates"), std::string::npos)
      << wrong.result.status();
  EXPECT_NE(wrong.result.status().message().find("got 49"), std::string::npos) << wrong.result.status();
  Payload with_indices = Exact(candidates, grads[0]);
  with_indices.kind = PayloadKind::kSparse;
  with_indices.indices = candidates;
  core->Push({"job", 7, 4, 1}, 0, with_indices, kT0, sparse.Callback());
  EXPECT_EQ(sparse.result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(sparse.result.status().message().find("takes candidate values, not a sparse payload"),
            std::string::npos)
      << sparse.result.status();
  core->Push({"job", 7, 4, 1}, 0, Encode("dense", grads[0]), kT0, dense.Callback());
  EXPECT_EQ(dense.result.status().code(), absl::StatusCode::kInvalidArgument);
  // Candidate values belong to a second round only: as a first-round push
  // (of the next step) they are refused by the group's compressor.
  Answer values_first;
  core->Push({"job", 8, 4}, 0, Exact(candidates, grads[0]), kT0, values_first.Callback());
  EXPECT_EQ(values_first.result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(values_first.result.status().message().find("candidate values"), std::string::npos)
      << values_first.result.status();
  core->Push({"job", 8, 4, 1}, 0, Exact(candidates, grads[0]), kT0, early.Callback());
  EXPECT_EQ(early.result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(early.result.status().message().find("its second round cannot start"), std::string::npos);
  EXPECT_EQ(core->stats().rounds_open, 0u);

  // Each worker sends its exact values there (worker 1 twice: not added twice).
  Answer second[3], repeated;
  for (uint32_t w = 0; w < 3; ++w) {
    core->Push({"job", 7, 4, 1}, w, Exact(candidates, grads[w]), kT0, second[w].Callback());
    if (w == 1) core->Push({"job", 7, 4, 1}, w, Exact(candidates, grads[w]), kT0, repeated.Callback());
    // What the open round holds (against --max_held_mb) counts the values
    // placed at their candidates, indices included: 8 bytes a candidate.
    if (w < 2) EXPECT_EQ(core->stats().bytes_held, (w + 1) * 8 * candidates.size());
  }
  std::vector<float> expected;
  for (uint32_t i : candidates) expected.push_back(grads[0][i] + grads[1][i] + grads[2][i]);  // worker order
  for (Answer* answer : {&second[0], &second[1], &second[2], &repeated}) {
    ASSERT_TRUE(answer->result.ok()) << answer->result.status();
    EXPECT_EQ(answer->result->update->indices, candidates);
    EXPECT_EQ(answer->result->update->values, expected);
  }
  // A group without a second round refuses one.
  auto plain = MakeCore(1, {{0, 4, "dense"}});
  Answer refused;
  plain->Push({"job", 0, 0, 1}, 0, Exact({1}, {1, 2, 3, 4}), kT0, refused.Callback());
  EXPECT_EQ(refused.result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.result.status().message().find("round 1 of group 0: the group takes 1 round per step"),
            std::string::npos)
      << refused.result.status();
}

// PowerSGD: round 0 sums the factors P (and the vectors) and answers them
// orthonormalized; round 1 must carry exactly the layout's Q values, and
// answers their sum. A push of another size or kind is refused by name and
// changes nothing.
TEST(AggregationCoreTest, ALowRankGroupSumsItsFactorsAndRefusesAFactorOfAnotherSize) {
  const std::string spec = "powersgd:rank=2,seed=4,shapes=20x30.30";  // P: 20x2 + 30; Q: 30x2
  const uint64_t n = 20 * 30 + 30;
  GroupSpec group{2, n, spec};
  group.rounds = 2;
  auto core = MakeCore(2, {group});
  std::vector<std::unique_ptr<Compressor>> workers;
  Answer first[2];
  for (uint32_t w = 0; w < 2; ++w) {
    workers.push_back(*CompressorRegistry::Default().Create(spec));
    absl::StatusOr<Payload> p = workers[w]->Encode(GaussianVector(n, 60 + w), EncodeContext{});
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->values.size(), 20u * 2 + 30);
    core->Push({"job", 3, 2}, w, *p, kT0, first[w].Callback());
  }
  ASSERT_TRUE(first[0].result.ok()) << first[0].result.status();
  const Update p_hat = *first[0].result->update;
  EXPECT_TRUE(p_hat.dense);
  ASSERT_EQ(p_hat.values.size(), 20u * 2 + 30);

  std::vector<Payload> q;
  for (uint32_t w = 0; w < 2; ++w) q.push_back(*workers[w]->low_rank()->SecondRound(p_hat));
  ASSERT_EQ(q[0].values.size(), 30u * 2);
  Answer shorter, sparse;
  Payload cut = q[0];
  cut.values.pop_back();
  core->Push({"job", 3, 2, 1}, 0, cut, kT0, shorter.Callback());
  EXPECT_EQ(shorter.result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(shorter.result.status().message().find("60"), std::string::npos) << shorter.result.status();
  Payload with_indices = q[0];
  with_indices.kind = PayloadKind::kSparse;
  with_indices.indices.resize(with_indices.values.size());
  for (uint32_t i = 0; i < with_indices.indices.size(); ++i) with_indices.indices[i] = i;
  core->Push({"job", 3, 2, 1}, 0, with_indices, kT0, sparse.Callback());
  EXPECT_EQ(sparse.result.status().code(), absl::StatusCode::kInvalidArgument) << sparse.result.status();
  EXPECT_EQ(core->stats().bytes_held, 0u) << "nothing refused is held";

  Answer second[2];
  for (uint32_t w = 0; w < 2; ++w) core->Push({"job", 3, 2, 1}, w, q[w], kT0, second[w].Callback());
  for (Answer& a : second) {
    ASSERT_TRUE(a.result.ok()) << a.result.status();
    ASSERT_EQ(a.result->update->values.size(), q[0].values.size());
    for (size_t e = 0; e < q[0].values.size(); ++e) {
      EXPECT_EQ(a.result->update->values[e], q[0].values[e] + q[1].values[e]) << e;
    }
  }
}

// The two-round fixed-size sketch: the first round answers p k candidates,
// the second the k largest of the exact sums there (re-selection applies to
// the final round).
TEST(AggregationCoreTest, ASecondRoundReselectsTheTopKOfTheExactSums) {
  const size_t n = 5000;
  const std::string spec = "count_sketch:method=candidates,k=20,rows=1,width=2,candidates=3,seed=5";
  GroupSpec group{0, n, spec, /*reselect_top_k=*/20};
  group.rounds = 2;
  auto core = MakeCore(2, {group});
  std::vector<std::vector<float>> grads;
  Answer first[2], second[2];
  for (uint32_t w = 0; w < 2; ++w) {
    grads.push_back(GaussianVector(n, 70 + w));
    Payload sketch = Encode(spec, grads[w], 3);
    core->Push({"job", 3, 0}, w, std::move(sketch), kT0, first[w].Callback());
  }
  ASSERT_TRUE(first[0].result.ok()) << first[0].result.status();
  const std::vector<uint32_t> candidates = first[0].result->update->indices;
  ASSERT_EQ(candidates.size(), 60u) << "the first round is not re-selected";
  for (uint32_t w = 0; w < 2; ++w) {
    core->Push({"job", 3, 0, 1}, w, Exact(candidates, grads[w]), kT0, second[w].Callback());
  }
  std::vector<std::pair<float, uint32_t>> sums;
  for (uint32_t i : candidates) sums.push_back({std::abs(grads[0][i] + grads[1][i]), i});
  std::sort(sums.rbegin(), sums.rend());
  std::vector<uint32_t> top;
  for (int j = 0; j < 20; ++j) top.push_back(sums[j].second);
  std::sort(top.begin(), top.end());
  ASSERT_TRUE(second[1].result.ok()) << second[1].result.status();
  const Update& answer = *second[1].result->update;
  EXPECT_EQ(answer.indices, top);
  for (size_t j = 0; j < answer.indices.size(); ++j) {
    EXPECT_EQ(answer.values[j], grads[0][answer.indices[j]] + grads[1][answer.indices[j]]) << j;
  }
}

TEST(AggregationCoreTest, RepeatedPushIsNotAddedTwiceAndLatePushGetsTheKeptAnswer) {
  auto core = MakeCore(2, {{0, 4, "dense"}});
  Answer first, repeat, other, late;
  core->Push({"job", 3, 0}, 0, Encode("dense", {1, 1, 1, 1}), kT0, first.Callback());
  core->Push({"job", 3, 0}, 0, Encode("dense", {1, 1, 1, 1}), kT0, repeat.Callback());
  EXPECT_FALSE(repeat.called);
  core->Push({"job", 3, 0}, 1, Encode("dense", {2, 2, 2, 2}), kT0, other.Callback());
  for (Answer* a : {&first, &repeat, &other}) {
    ASSERT_TRUE(a->result.ok());
    EXPECT_EQ(a->result->update->values, (std::vector<float>{3, 3, 3, 3}));
    EXPECT_EQ(a->calls, 1);
  }
  core->Push({"job", 3, 0}, 1, Encode("dense", {9, 9, 9, 9}), kT0, late.Callback());
  ASSERT_TRUE(late.called);
  ASSERT_TRUE(late.result.ok());
  EXPECT_EQ(late.result->update, first.result->update);
  EXPECT_EQ(core->stats().rounds_completed, 1u);
}

// A flood of repeats of one push holds at most max_pushes_waiting calls of
// that worker on the round (or on its parked push): the next is refused
// RESOURCE_EXHAUSTED by name, and those waiting get the answer once.
TEST(AggregationCoreTest, AFloodOfRepeatsHoldsAtMostMaxPushesWaitingCalls) {
  auto core = MakeCore(3, {{0, 2, "dense"}}, absl::Seconds(10), [](AggregationConfig& c) {
    c.max_pushes_waiting = 3;
    c.step_window = 8;
  });
  std::deque<Answer> waiting(3);
  for (Answer& a : waiting) core->Push({"job", 0, 0}, 0, Encode("dense", {1, 1}), kT0, a.Callback());
  Answer refused;
  core->Push({"job", 0, 0}, 0, Encode("dense", {1, 1}), kT0, refused.Callback());
  ASSERT_TRUE(refused.called);
  EXPECT_EQ(refused.result.status().code(), absl::StatusCode::kResourceExhausted) << refused.result.status();
  EXPECT_NE(refused.result.status().message().find("worker 0 already has 3 pushes of"), std::string::npos)
      << refused.result.status();
  // The other workers' first pushes are taken whatever worker 0 did.
  Answer second, third;
  core->Push({"job", 0, 0}, 1, Encode("dense", {2, 2}), kT0, second.Callback());
  core->Push({"job", 0, 0}, 2, Encode("dense", {3, 3}), kT0, third.Callback());
  ASSERT_TRUE(third.result.ok()) << third.result.status();
  for (Answer& a : waiting) {
    ASSERT_EQ(a.calls, 1);
    ASSERT_TRUE(a.result.ok());
    EXPECT_EQ(a.result->update->values, (std::vector<float>{6, 6}));
  }
  // Parked: worker 0 holds a round outside the window that worker 1 joined,
  // so its push of a still farther step parks; repeats wait with it up to
  // the same bound.
  Answer held, joined;
  core->Push({"job", 1000, 0}, 0, Encode("dense", {1, 1}), kT0, held.Callback());
  core->Push({"job", 1000, 0}, 1, Encode("dense", {1, 1}), kT0, joined.Callback());
  std::deque<Answer> parked(3);
  for (Answer& a : parked) core->Push({"job", 2000, 0}, 0, Encode("dense", {1, 1}), kT0, a.Callback());
  EXPECT_EQ(core->stats().parked_now, 1u);
  Answer refused_parked;
  core->Push({"job", 2000, 0}, 0, Encode("dense", {1, 1}), kT0, refused_parked.Callback());
  ASSERT_TRUE(refused_parked.called);
  EXPECT_EQ(refused_parked.result.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused_parked.result.status().message().find("waiting for its round to open"), std::string::npos)
      << refused_parked.result.status();
  Answer completes;
  core->Push({"job", 1000, 0}, 2, Encode("dense", {1, 1}), kT0, completes.Callback());
  ASSERT_TRUE(completes.result.ok()) << completes.result.status();
  // Once the parked push joins a round, that round counts its waiting calls.
  Answer opener;
  core->Push({"job", 2000, 0}, 1, Encode("dense", {2, 2}), kT0, opener.Callback());
  EXPECT_EQ(core->stats().parked_joined, 1u);
  Answer past_bound;
  core->Push({"job", 2000, 0}, 0, Encode("dense", {1, 1}), kT0, past_bound.Callback());
  ASSERT_TRUE(past_bound.called);
  EXPECT_EQ(past_bound.result.status().code(), absl::StatusCode::kResourceExhausted);
  Answer last;
  core->Push({"job", 2000, 0}, 2, Encode("dense", {3, 3}), kT0, last.Callback());
  for (Answer* a : {&parked[0], &parked[1], &parked[2], &opener, &last}) {
    ASSERT_EQ(a->calls, 1);
    ASSERT_TRUE(a->result.ok()) << a->result.status();
    EXPECT_EQ(a->result->update->values, (std::vector<float>{6, 6}));
  }
  EXPECT_EQ(core->stats().rounds_open, 0u);
  EXPECT_EQ(core->stats().bytes_held, 0u);
}

TEST(AggregationCoreTest, AnswersOfOldStepsAreDroppedAndSaySo) {
  auto core = MakeCore(1, {{0, 2, "dense"}});
  for (uint64_t step = 0; step < 4; ++step) {
    Answer a;
    core->Push({"job", step, 0}, 0, Encode("dense", {1, 2}), kT0, a.Callback());
    ASSERT_TRUE(a.result.ok());
  }
  Answer old, kept;
  core->Push({"job", 0, 0}, 0, Encode("dense", {1, 2}), kT0, old.Callback());
  EXPECT_EQ(old.result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(old.result.status().message().find("step 0"), std::string::npos);
  core->Push({"job", 3, 0}, 0, Encode("dense", {1, 2}), kT0, kept.Callback());
  EXPECT_TRUE(kept.result.ok());
}

// Pushes `step` of group 0 from every worker in [0, workers) with payload
// {value, value}; returns the last worker's answer.
absl::StatusOr<RoundResult> PushStep(AggregationCore& core, uint32_t workers, uint64_t step, float value = 1,
                                     absl::Time now = kT0) {
  std::deque<Answer> answers(workers);  // alive until the round completes
  for (uint32_t w = 0; w < workers; ++w) {
    core.Push({"job", step, 0}, w, Encode("dense", {value, value}), now, answers[w].Callback());
  }
  return answers.back().result;
}

TEST(AggregationCoreTest, AForgedFarFutureRoundDoesNotBlockLaterSteps) {
  constexpr uint64_t kFar = std::numeric_limits<int64_t>::max();
  for (const bool fresh : {false, true}) {
    SCOPED_TRACE(fresh ? "on a fresh shard" : "after 10 honest steps");
    auto core = MakeCore(2, {{0, 2, "dense"}});
    uint64_t step = 0;
    for (; !fresh && step < 10; ++step) ASSERT_TRUE(PushStep(*core, 2, step).ok());
    // Both workers' credentials complete a round far in the future.
    ASSERT_TRUE(PushStep(*core, 2, kFar, 1e6).ok());
    // Every honest step still runs, with its own sum.
    for (const uint64_t end = step + 10; step < end; ++step) {
      absl::StatusOr<RoundResult> r = PushStep(*core, 2, step, 1);
      ASSERT_TRUE(r.ok()) << "step " << step << ": " << r.status();
      EXPECT_EQ(r->update->values, (std::vector<float>{2, 2}));
    }
    EXPECT_EQ(core->stats().rounds_open, 0u);
  }
}

TEST(AggregationCoreTest, AFloodOutsideTheWindowHoldsOneRoundAndOneParkedPushPerWorker) {
  auto core = MakeCore(2, {{0, 2, "dense"}}, absl::Seconds(10), [](AggregationConfig& c) {
    c.step_window = 8;
    c.max_rounds_alone = 1000;  // the window's bound alone here
  });
  ASSERT_TRUE(PushStep(*core, 2, 0).ok());
  // A flood of single pushes of ever farther steps from one worker: those
  // within the window open; outside it the worker's first push takes its
  // slot, its second parks, and every later one is refused at once
  // (ABORTED, naming both), holding nothing.
  const uint64_t bytes = Encode("dense", {1, 1}).WireBytes();
  std::deque<Answer> flood(20000);  // the open rounds' callbacks run when they expire
  for (uint64_t step = 1; step < 20000; ++step) {
    core->Push({"job", step, 0}, 0, Encode("dense", {1, 1}), kT0, flood[step].Callback());
    if (step > 10) {
      ASSERT_TRUE(flood[step].called) << step;
      ASSERT_EQ(flood[step].result.status().code(), absl::StatusCode::kAborted) << flood[step].result.status();
      ASSERT_NE(flood[step].result.status().message().find(
                    absl::StrCat("step ", step, " of group 0 is outside the step window")),
                std::string::npos)
          << flood[step].result.status();
      ASSERT_NE(flood[step].result.status().message().find(
                    "worker 0 holds step 9 there and waits on step 10: push again once another worker opens it"),
                std::string::npos)
          << flood[step].result.status();
    }
  }
  for (uint64_t step = 1; step <= 10; ++step) EXPECT_FALSE(flood[step].called) << step;
  AggregationCore::Stats stats = core->stats();
  EXPECT_EQ(stats.rounds_open, 8u + 1u);  // steps 1..8, and worker 0's one round outside the window
  EXPECT_EQ(stats.parked_now, 1u);
  EXPECT_EQ(stats.parked_beyond_window, 1u);
  EXPECT_EQ(stats.superseded_beyond_window, 0u);
  EXPECT_EQ(stats.refused_out_of_window, 19999u - 10u);
  EXPECT_EQ(stats.bytes_held, 10u * bytes);
  // The honest next step completes; the flood's rounds and parked push expire.
  Answer honest;
  core->Push({"job", 1, 0}, 1, Encode("dense", {1, 1}), kT0, honest.Callback());
  ASSERT_TRUE(honest.result.ok()) << honest.result.status();
  EXPECT_EQ(core->ExpireRounds(kT0 + absl::Seconds(11)), 8);
  ASSERT_TRUE(flood[10].called);
  EXPECT_EQ(flood[10].result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(flood[10].result.status().message().find("worker 0's push of step 10 of group 0"), std::string::npos)
      << flood[10].result.status();
  stats = core->stats();
  EXPECT_EQ(stats.rounds_open, 0u);
  EXPECT_EQ(stats.parked_now, 0u);
  EXPECT_EQ(stats.parked_failed, 1u);
  EXPECT_EQ(stats.bytes_held, 0u);
}

// A flood of ever nearer steps supersedes its own held round each time: one
// round at a time, whatever the flood's length.
TEST(AggregationCoreTest, AFloodOfEverNearerStepsHoldsOneRound) {
  auto core = MakeCore(2, {{0, 2, "dense"}}, absl::Seconds(10), [](AggregationConfig& c) { c.step_window = 8; });
  ASSERT_TRUE(PushStep(*core, 2, 0).ok());
  std::deque<Answer> flood(1000);
  for (uint64_t i = 0; i < 1000; ++i) {
    core->Push({"job", 5000 - i, 0}, 0, Encode("dense", {1, 1}), kT0, flood[i].Callback());
    if (i > 0) {
      ASSERT_TRUE(flood[i - 1].called);
      ASSERT_EQ(flood[i - 1].result.status().code(), absl::StatusCode::kUnavailable);
      EXPECT_NE(flood[i - 1].result.status().message().find(
                    absl::StrCat("superseded by worker 0's push of step ", 5000 - i, ", nearer the group's progress")),
                std::string::npos)
          << flood[i - 1].result.status();
    }
  }
  EXPECT_EQ(core->stats().rounds_open, 1u);
  EXPECT_EQ(core->stats().superseded_beyond_window, 999u);
  EXPECT_EQ(core->stats().parked_now, 0u);
}

TEST(AggregationCoreTest, APushWhoseSlotIsTakenParksJoinsItsRoundAndAFartherOneIsRefused) {
  auto core = MakeCore(3, {{0, 2, "dense"}}, absl::Seconds(10), [](AggregationConfig& c) { c.step_window = 8; });
  ASSERT_TRUE(PushStep(*core, 3, 0).ok());
  // Worker 0 opens a round outside the window and worker 1 joins it: the
  // round is the job's, not worker 0's alone, so worker 0's next push beyond
  // the window parks (it waits, opening nothing), and one farther than the
  // parked push is refused, naming the window, the held and the parked step.
  Answer opened, joined, parked, repeat, farther;
  core->Push({"job", 1000, 0}, 0, Encode("dense", {1, 1}), kT0, opened.Callback());
  core->Push({"job", 1000, 0}, 1, Encode("dense", {1, 1}), kT0, joined.Callback());
  core->Push({"job", 2000, 0}, 0, Encode("dense", {4, 4}), kT0, parked.Callback());
  core->Push({"job", 2000, 0}, 0, Encode("dense", {4, 4}), kT0, repeat.Callback());  // waits with it, added once
  core->Push({"job", 1u << 30, 0}, 0, Encode("dense", {1, 1}), kT0, farther.Callback());
  EXPECT_FALSE(parked.called);
  EXPECT_FALSE(repeat.called);
  ASSERT_TRUE(farther.called);
  EXPECT_EQ(farther.result.status().code(), absl::StatusCode::kAborted) << farther.result.status();
  EXPECT_NE(farther.result.status().message().find("step 1073741824 of group 0"), std::string::npos);
  EXPECT_NE(farther.result.status().message().find("--step_window"), std::string::npos);
  EXPECT_NE(farther.result.status().message().find("worker 0 holds step 1000 there and waits on step 2000"),
            std::string::npos)
      << farther.result.status();
  EXPECT_EQ(core->stats().rounds_open, 1u);
  EXPECT_EQ(core->stats().parked_now, 1u);
  EXPECT_FALSE(opened.called);
  EXPECT_FALSE(joined.called);
  // The third worker completes the round; the progress moves to it.
  Answer third;
  core->Push({"job", 1000, 0}, 2, Encode("dense", {1, 1}), kT0, third.Callback());
  ASSERT_TRUE(third.result.ok()) << third.result.status();
  ASSERT_TRUE(opened.result.ok());
  EXPECT_EQ(opened.result->update->values, (std::vector<float>{3, 3}));
  // Step 2000 is still outside the window of 1000. Worker 1 opens it in its
  // own slot, the parked push joins, and worker 2 completes it.
  Answer second, last;
  core->Push({"job", 2000, 0}, 1, Encode("dense", {2, 2}), kT0, second.Callback());
  EXPECT_EQ(core->stats().parked_now, 0u);
  EXPECT_EQ(core->stats().parked_joined, 1u);
  core->Push({"job", 2000, 0}, 2, Encode("dense", {3, 3}), kT0, last.Callback());
  for (Answer* a : {&parked, &repeat, &second, &last}) {
    ASSERT_TRUE(a->called);
    ASSERT_TRUE(a->result.ok()) << a->result.status();
    EXPECT_EQ(a->result->update->values, (std::vector<float>{9, 9}));
  }
  ASSERT_TRUE(PushStep(*core, 3, 2001).ok());
  EXPECT_EQ(core->stats().rounds_open, 0u);
  EXPECT_EQ(core->stats().bytes_held, 0u);
}

TEST(AggregationCoreTest, ANearerPushReplacesTheParkedOne) {
  auto core = MakeCore(2, {{0, 2, "dense"}}, absl::Seconds(10), [](AggregationConfig& c) { c.step_window = 8; });
  ASSERT_TRUE(PushStep(*core, 2, 0).ok());
  Answer held, far, nearer;
  core->Push({"job", 100, 0}, 0, Encode("dense", {1, 1}), kT0, held.Callback());
  core->Push({"job", 9000, 0}, 0, Encode("dense", {1, 1}), kT0, far.Callback());  // farther than 100: parks
  core->Push({"job", 500, 0}, 0, Encode("dense", {1, 1}), kT0, nearer.Callback());  // replaces it
  ASSERT_TRUE(far.called);
  EXPECT_EQ(far.result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(far.result.status().message().find("worker 0's push of step 9000 of group 0"), std::string::npos)
      << far.result.status();
  EXPECT_NE(far.result.status().message().find("was replaced by its push of step 500"), std::string::npos)
      << far.result.status();
  EXPECT_FALSE(nearer.called);
  EXPECT_FALSE(held.called);
  EXPECT_EQ(core->stats().parked_now, 1u);
  EXPECT_EQ(core->stats().bytes_held, 2 * Encode("dense", {1, 1}).WireBytes());
  // Shutdown answers the parked push too.
  core->FailAllRounds(absl::UnavailableError("shutting down"));
  ASSERT_TRUE(nearer.called);
  EXPECT_EQ(nearer.result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(core->stats().bytes_held, 0u);
  EXPECT_EQ(core->stats().parked_now, 0u);
}

// Each worker's slot holds a round it alone pushed, nearer the progress than
// the job's next step: every worker parks that step, and the round opens
// and completes from the parked pushes.
TEST(AggregationCoreTest, WhenEveryWorkerParksTheSameStepItsRoundCompletes) {
  auto core = MakeCore(2, {{0, 2, "dense"}}, absl::Seconds(10), [](AggregationConfig& c) { c.step_window = 8; });
  ASSERT_TRUE(PushStep(*core, 2, 0).ok());
  Answer held0, held1, parked0, parked1;
  core->Push({"job", 100, 0}, 0, Encode("dense", {1, 1}), kT0, held0.Callback());
  core->Push({"job", 200, 0}, 1, Encode("dense", {1, 1}), kT0, held1.Callback());
  core->Push({"job", 5000, 0}, 0, Encode("dense", {1, 1}), kT0, parked0.Callback());
  EXPECT_FALSE(parked0.called);
  core->Push({"job", 5000, 0}, 1, Encode("dense", {2, 2}), kT0, parked1.Callback());
  for (Answer* a : {&parked0, &parked1}) {
    ASSERT_TRUE(a->called);
    ASSERT_TRUE(a->result.ok()) << a->result.status();
    EXPECT_EQ(a->result->update->values, (std::vector<float>{3, 3}));
  }
  EXPECT_EQ(core->stats().parked_now, 0u);
  EXPECT_EQ(core->stats().parked_joined, 2u);
  // Only the two held rounds stay open, with their payloads.
  EXPECT_EQ(core->stats().rounds_open, 2u);
  EXPECT_EQ(core->stats().bytes_held, 2 * Encode("dense", {1, 1}).WireBytes());
  // The progress moved to 5000: the held rounds are now far behind it.
  ASSERT_TRUE(PushStep(*core, 2, 5001).ok());
  EXPECT_EQ(core->ExpireRounds(kT0 + absl::Seconds(11)), 2);
  EXPECT_EQ(core->stats().rounds_open, 0u);
  EXPECT_EQ(core->stats().bytes_held, 0u);
}

// A parked push joins its step's round however that round opens: here
// within the window, once the progress came near. The round it joined then
// fails at its deadline, and the parked push's caller hears it once.
TEST(AggregationCoreTest, AParkedPushJoinsARoundOpenedWithinTheWindowAndEndsWithIt) {
  auto core = MakeCore(3, {{0, 2, "dense"}}, absl::Seconds(10), [](AggregationConfig& c) { c.step_window = 8; });
  ASSERT_TRUE(PushStep(*core, 3, 0).ok());
  Answer held, opened20;
  core->Push({"job", 100, 0}, 0, Encode("dense", {1, 1}), kT0, held.Callback());
  core->Push({"job", 20, 0}, 1, Encode("dense", {1, 1}), kT0, opened20.Callback());  // opens in worker 1's slot
  Answer parked20;
  core->Push({"job", 20, 0}, 0, Encode("dense", {5, 5}), kT0, parked20.Callback());  // 20 is open: it joins
  Answer waits;
  core->Push({"job", 150, 0}, 0, Encode("dense", {7, 7}), kT0, waits.Callback());  // farther than 100: parks
  EXPECT_EQ(core->stats().parked_now, 1u);
  // The job walks up to 145: step 150 comes within the window and worker 2
  // opens it there; the parked push joins.
  for (uint64_t step = 1; step <= 19; ++step) ASSERT_TRUE(PushStep(*core, 3, step).ok()) << step;
  Answer twenty;
  core->Push({"job", 20, 0}, 2, Encode("dense", {1, 1}), kT0, twenty.Callback());
  ASSERT_TRUE(twenty.result.ok()) << twenty.result.status();
  for (uint64_t step = 21; step <= 145; ++step) {
    if (step == 100) continue;  // worker 0's held round: the others complete it below
    ASSERT_TRUE(PushStep(*core, 3, step).ok()) << step;
  }
  Answer opener;
  core->Push({"job", 150, 0}, 2, Encode("dense", {1, 1}), kT0, opener.Callback());
  EXPECT_EQ(core->stats().parked_now, 0u);
  EXPECT_EQ(core->stats().parked_joined, 1u);
  EXPECT_FALSE(waits.called);
  // Worker 1 never pushes step 150: the round fails at its deadline, and
  // the adopted push's caller hears it once.
  core->ExpireRounds(kT0 + absl::Seconds(11));
  ASSERT_TRUE(waits.called);
  EXPECT_EQ(waits.calls, 1);
  EXPECT_EQ(waits.result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(waits.result.status().message().find("missing workers 1 of 3"), std::string::npos)
      << waits.result.status();
  EXPECT_EQ(core->stats().rounds_open, 0u);
  EXPECT_EQ(core->stats().bytes_held, 0u);
}

TEST(AggregationCoreTest, AJobReturningPastTheWindowTakesTheOneRoundOutsideIt) {
  auto core = MakeCore(2, {{0, 2, "dense"}}, absl::Seconds(10), [](AggregationConfig& c) { c.step_window = 8; });
  ASSERT_TRUE(PushStep(*core, 2, 0).ok());
  // The workers trained steps 1..99 on the decentralized route; they return.
  absl::StatusOr<RoundResult> back = PushStep(*core, 2, 100);
  ASSERT_TRUE(back.ok()) << back.status();
  // The progress moved: the next steps are within the window.
  for (uint64_t step = 101; step < 120; ++step) ASSERT_TRUE(PushStep(*core, 2, step).ok()) << step;
}

// A flood of far-future steps claiming one worker holds only that worker's
// round and parked push outside the window. A job returning past the window
// at an earlier step (both workers push step 500, once each) gets its round
// in every order of the race: the flood first or the job first, the flood's
// claimed worker pushing before or after the other, the flood going on
// between them, and the flood claiming either worker.
TEST(AggregationCoreTest, AFloodAsOneWorkerCannotKeepAReturningJobOut) {
  const std::vector<std::vector<std::string>> orders = {
      {"flood", "other", "flood", "claimed"},          {"flood", "claimed", "flood", "other"},
      {"claimed", "flood", "other"},                   {"other", "flood", "claimed"},
      {"flood", "claimed", "other"},                   {"claimed", "flood", "flood", "other", "flood"},
      {"claimed", "other", "flood"},                   {"flood", "other", "claimed", "flood"},
  };
  for (const std::vector<std::string>& order : orders) {
    for (const uint32_t claimed : {0u, 1u}) {
      SCOPED_TRACE(testing::Message() << absl::StrJoin(order, ", ") << "; the flood claims worker " << claimed);
      auto core = MakeCore(2, {{0, 2, "dense"}}, absl::Seconds(10), [](AggregationConfig& c) { c.step_window = 8; });
      ASSERT_TRUE(PushStep(*core, 2, 0).ok());
      const uint32_t other = 1 - claimed;
      std::deque<Answer> flood;
      Answer claimed_push, other_push;
      for (const std::string& event : order) {
        if (event == "flood") {
          for (int i = 0; i < 50; ++i) {
            flood.emplace_back();
            core->Push({"job", 1000000 + flood.size(), 0}, claimed, Encode("dense", {9, 9}), kT0,
                       flood.back().Callback());
          }
        } else {
          const uint32_t worker = event == "claimed" ? claimed : other;
          const float value = worker == 0 ? 1.0f : 2.0f;
          core->Push({"job", 500, 0}, worker, Encode("dense", {value, value}), kT0,
                     (event == "claimed" ? claimed_push : other_push).Callback());
        }
      }
      // One push each, and both have the sum.
      for (Answer* a : {&claimed_push, &other_push}) {
        ASSERT_TRUE(a->called);
        EXPECT_EQ(a->calls, 1);
        ASSERT_TRUE(a->result.ok()) << a->result.status();
        EXPECT_EQ(a->result->update->values, (std::vector<float>{3, 3}));
      }
      // The progress moved to 500: the next steps are within the window.
      ASSERT_TRUE(PushStep(*core, 2, 501).ok());
      // The flood held at most its worker's one round and one parked push.
      int waiting = 0;
      for (const Answer& a : flood) {
        waiting += !a.called;
        if (a.called) {  // superseded or replaced (UNAVAILABLE), or refused (ABORTED)
          EXPECT_TRUE(a.result.status().code() == absl::StatusCode::kUnavailable ||
                      a.result.status().code() == absl::StatusCode::kAborted)
              << a.result.status();
        }
      }
      EXPECT_LE(waiting, 2);
      EXPECT_LE(core->stats().rounds_open, 1u);
      EXPECT_LE(core->stats().parked_now, 1u);
    }
  }
}

// A flooder that claims a worker and floods steps nearer the progress than
// the job's takes that worker's slot and parking: the worker's push is
// refused (ABORTED) until the other worker opens the job's round, and lands
// when pushed again. With only the slot taken, the worker's one push parks and
// joins the round the other worker opens.
TEST(AggregationCoreTest, AFloodNearerTheProgressDelaysTheClaimedWorkerUntilTheRoundOpens) {
  for (const int flood_steps : {1, 2}) {
    SCOPED_TRACE(testing::Message() << "the flood pushes " << flood_steps << " step(s) near the window");
    auto core = MakeCore(2, {{0, 2, "dense"}}, absl::Seconds(10), [](AggregationConfig& c) { c.step_window = 8; });
    ASSERT_TRUE(PushStep(*core, 2, 0).ok());
    std::deque<Answer> flood(flood_steps);
    for (int i = 0; i < flood_steps; ++i) {
      core->Push({"job", 9u + i, 0}, 0, Encode("dense", {9, 9}), kT0, flood[i].Callback());
    }
    Answer first, other, again;
    core->Push({"job", 500, 0}, 0, Encode("dense", {1, 1}), kT0, first.Callback());
    if (flood_steps == 2) {
      ASSERT_TRUE(first.called);
      EXPECT_EQ(first.result.status().code(), absl::StatusCode::kAborted) << first.result.status();
      EXPECT_NE(first.result.status().message().find("push again once another worker opens it"),
                std::string::npos)
          << first.result.status();
    } else {
      EXPECT_FALSE(first.called);  // parked
    }
    core->Push({"job", 500, 0}, 1, Encode("dense", {2, 2}), kT0, other.Callback());
    Answer& claimed = flood_steps == 2 ? again : first;
    if (flood_steps == 2) core->Push({"job", 500, 0}, 0, Encode("dense", {1, 1}), kT0, again.Callback());
    for (Answer* a : {&claimed, &other}) {
      ASSERT_TRUE(a->called);
      ASSERT_TRUE(a->result.ok()) << a->result.status();
      EXPECT_EQ(a->result->update->values, (std::vector<float>{3, 3}));
    }
  }
}

// One worker pushing steps ahead within the window holds at most
// max_rounds_alone rounds of a group that nobody else has pushed into; the
// next is refused by name, holding nothing, while other workers' rounds and
// other groups open as usual, and a round joined by another worker no
// longer counts.
TEST(AggregationCoreTest, OneWorkerHoldsAtMostMaxRoundsAloneOfAGroup) {
  auto core = MakeCore(2, {{0, 2, "dense"}, {1, 2, "dense"}}, absl::Seconds(10),
                       [](AggregationConfig& c) { c.max_rounds_alone = 2; });
  std::deque<Answer> held(2);
  core->Push({"job", 0, 0}, 0, Encode("dense", {1, 1}), kT0, held[0].Callback());
  core->Push({"job", 1, 0}, 0, Encode("dense", {1, 1}), kT0, held[1].Callback());
  Answer third;
  core->Push({"job", 2, 0}, 0, Encode("dense", {1, 1}), kT0, third.Callback());
  ASSERT_TRUE(third.called);
  EXPECT_EQ(third.result.status().code(), absl::StatusCode::kResourceExhausted) << third.result.status();
  EXPECT_NE(third.result.status().message().find(
                "worker 0 already holds 2 rounds of group 0 that no other worker has pushed (steps 0, 1)"),
            std::string::npos)
      << third.result.status();
  EXPECT_EQ(core->stats().rounds_open, 2u);
  // Another group, and another worker, open rounds as usual.
  Answer other_group, other_worker;
  core->Push({"job", 0, 1}, 0, Encode("dense", {1, 1}), kT0, other_group.Callback());
  core->Push({"job", 5, 0}, 1, Encode("dense", {1, 1}), kT0, other_worker.Callback());
  EXPECT_FALSE(other_group.called);
  EXPECT_FALSE(other_worker.called);
  EXPECT_EQ(core->stats().rounds_open, 4u);
  // Worker 1 completes step 0: worker 0 holds one alone again and may open step 2.
  Answer completes, again;
  core->Push({"job", 0, 0}, 1, Encode("dense", {2, 2}), kT0, completes.Callback());
  ASSERT_TRUE(completes.result.ok()) << completes.result.status();
  core->Push({"job", 2, 0}, 0, Encode("dense", {1, 1}), kT0, again.Callback());
  EXPECT_FALSE(again.called);
}

// Issue 70: a flood in worker 0's name fills its share of rounds held alone
// within the window (a fresh shard: the flood's first round anchors the
// window at 2,000,000), then the job pushes its own step 900, far outside
// it. Whichever worker pushes first, in every order of the race and with
// one push each, the job's round completes: worker 0's push takes its slot
// outside the window, which its share of rounds within it does not limit.
TEST(AggregationCoreTest, AWorkersOwnFarRoundsDoNotKeepTheJobsRoundOutInAnyOrderOfTheRace) {
  std::vector<uint32_t> order = {0, 1, 2};
  int orders = 0;
  do {
    ++orders;
    SCOPED_TRACE(testing::Message() << "pushes of step 900 in the order " << absl::StrJoin(order, ", "));
    auto core = MakeCore(3, {{3, 2, "dense"}});
    std::deque<Answer> flood(5);
    for (uint64_t i = 0; i < flood.size(); ++i) {
      core->Push({"job", 2000000 + i, 3}, 0, Encode("dense", {9, 9}), kT0, flood[i].Callback());
    }
    for (uint64_t i = 0; i < 4; ++i) EXPECT_FALSE(flood[i].called) << i;  // held alone, within the window
    ASSERT_TRUE(flood[4].called);  // the share is full
    EXPECT_EQ(flood[4].result.status().code(), absl::StatusCode::kResourceExhausted) << flood[4].result.status();
    // The job's step 900, then its next steps (the flood still open), each
    // in this order of the race.
    for (uint64_t step = 900; step < 903; ++step) {
      std::deque<Answer> job(3);
      for (const uint32_t worker : order) {
        const float value = static_cast<float>(worker + 1);
        core->Push({"job", step, 3}, worker, Encode("dense", {value, value}), kT0, job[worker].Callback());
      }
      for (uint32_t worker = 0; worker < 3; ++worker) {
        Answer& a = job[worker];
        ASSERT_TRUE(a.called) << "step " << step << ", worker " << worker;
        EXPECT_EQ(a.calls, 1);
        ASSERT_TRUE(a.result.ok()) << "step " << step << ", worker " << worker << ": " << a.result.status();
        EXPECT_EQ(a.result->update->values, (std::vector<float>{6, 6}));
      }
    }
    // The flood's rounds are untouched (far outside the window now): they
    // wait for their deadline.
    for (uint64_t i = 0; i < 4; ++i) EXPECT_FALSE(flood[i].called) << i;
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_EQ(orders, 6);
}

// A flood in worker 0's name within the window, just ahead of the job (its
// share of rounds held alone full), renewed after every step: the job's
// next step, nearer the progress, takes the place of the flood's farthest
// round, whichever worker pushes first.
TEST(AggregationCoreTest, AFloodJustAheadOfTheJobGivesWayToItsNextStepInAnyOrder) {
  std::vector<uint32_t> order = {0, 1};
  do {
    SCOPED_TRACE(testing::Message() << "pushes in the order " << absl::StrJoin(order, ", "));
    auto core = MakeCore(2, {{0, 2, "dense"}});
    ASSERT_TRUE(PushStep(*core, 2, 899).ok());  // the progress: 899
    std::deque<Answer> flood;
    for (uint64_t step = 900; step < 905; ++step) {
      // Renewed: four rounds held alone, 50 to 53 steps ahead of the job's.
      for (uint64_t ahead = step + 50; ahead < step + 54; ++ahead) {
        flood.emplace_back();
        core->Push({"job", ahead, 0}, 0, Encode("dense", {9, 9}), kT0, flood.back().Callback());
      }
      std::deque<Answer> job(2);
      for (const uint32_t worker : order) {
        core->Push({"job", step, 0}, worker, Encode("dense", {1, 1}), kT0, job[worker].Callback());
      }
      for (uint32_t worker = 0; worker < 2; ++worker) {
        ASSERT_TRUE(job[worker].called) << "step " << step << ", worker " << worker;
        ASSERT_TRUE(job[worker].result.ok()) << "step " << step << ", worker " << worker << ": "
                                             << job[worker].result.status();
        EXPECT_EQ(job[worker].result->update->values, (std::vector<float>{2, 2}));
      }
    }
    // The flood never held more than its share within the window.
    EXPECT_LE(core->stats().rounds_open, 4u);
    // Where worker 0 pushed first, its share was full: the job's step took
    // the place of the flood's farthest round.
    if (order[0] == 0) EXPECT_GE(core->stats().superseded_held_alone, 5u);
  } while (std::next_permutation(order.begin(), order.end()));
}

TEST(AggregationCoreTest, CapsOnOpenRoundsAndHeldBytesRefuseNewRoundsOnly) {
  auto core = MakeCore(2, {{0, 2, "dense"}, {1, 2, "dense"}}, absl::Seconds(10), [](AggregationConfig& c) {
    c.max_open_rounds = 3;
    c.max_rounds_alone = 1000;  // the shard-wide caps alone here
  });
  std::vector<Answer> open(3);
  core->Push({"job", 0, 0}, 0, Encode("dense", {1, 1}), kT0, open[0].Callback());
  core->Push({"job", 1, 0}, 0, Encode("dense", {1, 1}), kT0, open[1].Callback());
  core->Push({"job", 0, 1}, 0, Encode("dense", {1, 1}), kT0, open[2].Callback());
  Answer over;
  core->Push({"job", 1, 1}, 0, Encode("dense", {1, 1}), kT0, over.Callback());
  EXPECT_EQ(over.result.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over.result.status().message().find("--max_open_rounds"), std::string::npos);
  // Rounds already open still take their pushes and complete.
  Answer completes;
  core->Push({"job", 0, 0}, 1, Encode("dense", {2, 2}), kT0, completes.Callback());
  ASSERT_TRUE(completes.result.ok()) << completes.result.status();
  EXPECT_EQ(completes.result->update->values, (std::vector<float>{3, 3}));
  EXPECT_EQ(core->stats().refused_over_capacity, 1u);

  const uint64_t one_payload = Encode("dense", {1, 1}).WireBytes();
  auto small = MakeCore(2, {{0, 2, "dense"}}, absl::Seconds(10), [&](AggregationConfig& c) {
    c.max_held_bytes = 2 * one_payload;
    c.max_rounds_alone = 1000;
  });
  Answer a, b, c;
  small->Push({"job", 0, 0}, 0, Encode("dense", {1, 1}), kT0, a.Callback());
  small->Push({"job", 1, 0}, 0, Encode("dense", {1, 1}), kT0, b.Callback());
  EXPECT_EQ(small->stats().bytes_held, 2 * one_payload);
  small->Push({"job", 2, 0}, 0, Encode("dense", {1, 1}), kT0, c.Callback());
  EXPECT_EQ(c.result.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(c.result.status().message().find("--max_held_mb"), std::string::npos);
  Answer d;
  small->Push({"job", 0, 0}, 1, Encode("dense", {1, 1}), kT0, d.Callback());
  ASSERT_TRUE(d.result.ok()) << d.result.status();
  EXPECT_EQ(small->stats().bytes_held, one_payload);
}

TEST(AggregationCoreTest, ErrorsQuoteAClientsJobNameCut) {
  auto core = MakeCore(1, {{0, 2, "dense"}});
  Answer a;
  core->Push({std::string(1 << 20, 'j'), 0, 0}, 0, Encode("dense", {1, 1}), kT0, a.Callback());
  EXPECT_EQ(a.result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(a.result.status().message().size(), 200u) << a.result.status().message().substr(0, 300);
}

TEST(AggregationCoreTest, DeadlineFailsTheRoundNamingMissingWorkersThenARePushCompletes) {
  auto core = MakeCore(3, {{0, 2, "dense"}}, absl::Seconds(5));
  Answer a0, a1;
  core->Push({"job", 9, 0}, 0, Encode("dense", {1, 1}), kT0, a0.Callback());
  core->Push({"job", 9, 0}, 2, Encode("dense", {1, 1}), kT0, a1.Callback());
  EXPECT_EQ(core->ExpireRounds(kT0 + absl::Seconds(4)), 0);
  EXPECT_FALSE(a0.called);
  EXPECT_EQ(core->ExpireRounds(kT0 + absl::Seconds(5)), 1);
  for (Answer* a : {&a0, &a1}) {
    EXPECT_EQ(a->result.status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_NE(a->result.status().message().find("missing workers 1 of 3"), std::string::npos)
        << a->result.status();
  }
  AggregationCore::Stats stats = core->stats();
  EXPECT_EQ(stats.rounds_failed, 1u);
  EXPECT_EQ(stats.rounds_open, 0u);
  // Workers re-push the unfinished round: it starts afresh and completes once.
  Answer b[3];
  for (uint32_t w = 0; w < 3; ++w) {
    core->Push({"job", 9, 0}, w, Encode("dense", {1, 2}), kT0 + absl::Seconds(6), b[w].Callback());
  }
  ASSERT_TRUE(b[0].result.ok());
  EXPECT_EQ(b[0].result->update->values, (std::vector<float>{3, 6}));
}

TEST(AggregationCoreTest, BadRequestsAreRefusedByNameAndChangeNothing) {
  const std::string sketch = "count_sketch:k=10";
  auto core = MakeCore(2, {{0, 100, "dense"}, {4, 1000, sketch}});
  auto expect = [&](RoundKey key, uint32_t worker, Payload p, absl::StatusCode code,
                    absl::string_view needle) {
    Answer a;
    core->Push(key, worker, std::move(p), kT0, a.Callback());
    ASSERT_TRUE(a.called);
    EXPECT_EQ(a.result.status().code(), code) << a.result.status();
    EXPECT_NE(a.result.status().message().find(needle), std::string::npos) << a.result.status();
  };
  const Payload good = Encode("dense", GaussianVector(100, 1));
  expect({"other", 0, 0}, 0, good, absl::StatusCode::kInvalidArgument, "serves job 'job'");
  expect({"job", 0, 3}, 0, good, absl::StatusCode::kNotFound, "serves groups 0, 4");
  expect({"job", 0, 0}, 2, good, absl::StatusCode::kInvalidArgument, "worker 2 is out of range");
  Payload wrong_dim = Encode("dense", GaussianVector(99, 1));
  expect({"job", 0, 0}, 0, wrong_dim, absl::StatusCode::kInvalidArgument, "dim 99");
  Payload short_values = good;
  short_values.values.pop_back();
  expect({"job", 0, 0}, 0, short_values, absl::StatusCode::kInvalidArgument, "99 values");
  Payload sparse = Encode("topk:k=5", GaussianVector(100, 1));
  expect({"job", 0, 0}, 0, sparse, absl::StatusCode::kInvalidArgument, "takes dense payloads");
  Payload unsorted = Encode("topk:k=5", GaussianVector(1000, 1));
  std::swap(unsorted.indices[0], unsorted.indices[1]);
  expect({"job", 0, 4}, 0, unsorted, absl::StatusCode::kInvalidArgument, "not above");
  Payload foreign = Encode("count_sketch:k=10,seed=2", GaussianVector(1000, 1));
  expect({"job", 0, 4}, 0, foreign, absl::StatusCode::kInvalidArgument, "is not the seed of step 0");
  Payload narrow = Encode("count_sketch:k=10,width=2", GaussianVector(1000, 1));
  expect({"job", 0, 4}, 0, narrow, absl::StatusCode::kInvalidArgument, "does not match");
  // A sketch hashed for another step (a stale payload replayed into a round).
  Payload stale = Encode(sketch, GaussianVector(1000, 1), 5);
  expect({"job", 0, 4}, 0, stale, absl::StatusCode::kInvalidArgument, "is not the seed of step 0");

  // Nothing above touched state: a good round completes with the exact sum.
  EXPECT_EQ(core->stats().pushes, 0u);
  EXPECT_EQ(core->stats().rounds_open, 0u);
  Answer a, b;
  core->Push({"job", 0, 0}, 0, good, kT0, a.Callback());
  core->Push({"job", 0, 0}, 1, good, kT0, b.Callback());
  ASSERT_TRUE(b.result.ok());
  for (size_t i = 0; i < 100; ++i) EXPECT_EQ(b.result->update->values[i], 2 * good.values[i]);
}

TEST(AggregationCoreTest, NonFinitePayloadsAreRefusedNamingGroupAndIndexAndTheRoundGoesOn) {
  const std::string sketch = "count_sketch:k=10";
  auto core = MakeCore(2, {{0, 100, "dense"}, {4, 1000, sketch}, {7, 1000, "topk:k=5"}});
  const float kNaN = std::numeric_limits<float>::quiet_NaN(), kInf = std::numeric_limits<float>::infinity();
  auto refused = [&](RoundKey key, Payload p, absl::string_view needle) {
    Answer a;
    core->Push(key, 1, std::move(p), kT0, a.Callback());
    ASSERT_TRUE(a.called);
    EXPECT_EQ(a.result.status().code(), absl::StatusCode::kInvalidArgument) << a.result.status();
    EXPECT_NE(a.result.status().message().find(needle), std::string::npos) << a.result.status();
  };
  const Payload good = Encode("dense", GaussianVector(100, 1));
  Payload dense = good;
  dense.values[37] = kNaN;
  dense.values[80] = kInf;
  refused({"job", 0, 0}, dense, "payload of group 0 from worker 1 has a non-finite value: values[37] = nan");
  Payload table = Encode(sketch, GaussianVector(1000, 2));
  table.values[5] = -kInf;
  refused({"job", 0, 4}, table, "group 4 from worker 1 has a non-finite value: values[5] = -inf");
  Payload sparse = Encode("topk:k=5", GaussianVector(1000, 3));
  sparse.values[2] = kInf;
  refused({"job", 0, 7}, sparse,
          absl::StrCat("group 7 from worker 1 has a non-finite value: values[2] = inf (coordinate ",
                       sparse.indices[2], ")"));

  // The refusals changed nothing: worker 1 was not counted in any round, and
  // the round completes with the honest payloads, worker 1's included once it
  // sends a finite one.
  EXPECT_EQ(core->stats().pushes, 0u);
  EXPECT_EQ(core->stats().rounds_open, 0u);
  Answer a, b;
  core->Push({"job", 0, 0}, 0, good, kT0, a.Callback());
  refused({"job", 0, 0}, dense, "values[37]");
  EXPECT_FALSE(a.called);
  EXPECT_EQ(core->stats().pushes, 1u);
  core->Push({"job", 0, 0}, 1, good, kT0, b.Callback());
  ASSERT_TRUE(a.result.ok()) << a.result.status();
  ASSERT_TRUE(b.result.ok()) << b.result.status();
  EXPECT_EQ(b.result->contributors, 2u);
  for (size_t i = 0; i < 100; ++i) EXPECT_EQ(b.result->update->values[i], 2 * good.values[i]);
}

// Finite payloads that sum past float's range (each value near FLT_MAX) are
// refused as a round, not answered with infinities: every worker hears why,
// nothing is kept, and the next step's round is answered as usual.
TEST(AggregationCoreTest, PayloadsThatSumPastFloatsRangeFailTheRoundNotTheModels) {
  auto core = MakeCore(2, {{0, 100, "dense"}});
  Payload huge = Encode("dense", GaussianVector(100, 1));
  for (float& v : huge.values) v = 3e38f;
  huge.values[0] = 1;  // the first element sums to 2: the overflow is named at 1
  Answer a, b;
  core->Push({"job", 0, 0}, 0, huge, kT0, a.Callback());
  core->Push({"job", 0, 0}, 1, huge, kT0, b.Callback());
  for (Answer* answer : {&a, &b}) {
    ASSERT_TRUE(answer->called);
    EXPECT_EQ(answer->result.status().code(), absl::StatusCode::kInvalidArgument) << answer->result.status();
    EXPECT_NE(answer->result.status().message().find("sum past float's range (element 1 = inf)"), std::string::npos)
        << answer->result.status();
  }
  EXPECT_EQ(core->stats().rounds_failed, 1u);
  EXPECT_EQ(core->stats().rounds_open, 0u);
  EXPECT_EQ(core->stats().bytes_held, 0u);
  const Payload good = Encode("dense", GaussianVector(100, 2));
  Answer c, d;
  core->Push({"job", 1, 0}, 0, good, kT0, c.Callback());
  core->Push({"job", 1, 0}, 1, good, kT0, d.Callback());
  ASSERT_TRUE(d.result.ok()) << d.result.status();
  EXPECT_EQ(d.result->update->values[5], 2 * good.values[5]);
}

// A FetchSGD group's sketch-space state cannot be driven past float's range
// by sketches of finite cells (which would also keep a restarted shard from
// taking its records back): the step that would is refused, the state and
// the records stay finite, and a successor restores them.
TEST(AggregationCoreTest, AFetchSgdStateThatWouldOverflowRefusesTheRoundAndStaysFinite) {
  const size_t n = 4000;
  const std::string spec = "count_sketch:method=fetchsgd,k=20,rows=3,width=10,seed=4,momentum=0.9";
  std::vector<KeptAnswer> recorded;
  auto make = [&](std::vector<KeptAnswer>* sink) { return RecordingCore(6, n, spec, sink); };
  std::unique_ptr<AggregationCore> core = make(&recorded);
  auto round = [&](AggregationCore& c, uint64_t step, float cell) {
    Answer answers[2];
    for (uint32_t w = 0; w < 2; ++w) {
      Payload p = Encode(spec, GaussianVector(n, 100 * step + w), step);
      for (float& v : p.values) v = cell;
      c.Push({"job", step, 6}, w, std::move(p), kT0, answers[w].Callback());
    }
    EXPECT_TRUE(answers[1].called);
    return answers[1].result;
  };
  // 2 x 1.5e38 a cell fits a step; the next would overflow the momentum.
  ASSERT_TRUE(round(*core, 0, 1.5e38f).ok());
  ASSERT_EQ(recorded.size(), 1u);
  const absl::StatusOr<RoundResult> overflow = round(*core, 1, 1.5e38f);
  EXPECT_EQ(overflow.status().code(), absl::StatusCode::kInvalidArgument) << overflow.status();
  EXPECT_NE(overflow.status().message().find("past float's range"), std::string::npos) << overflow.status();
  ASSERT_EQ(recorded.size(), 1u);  // nothing recorded for the refused step
  for (float v : *recorded.back().group_state) ASSERT_TRUE(std::isfinite(v));
  std::vector<KeptAnswer> successor_records;
  std::unique_ptr<AggregationCore> successor = make(&successor_records);
  ASSERT_TRUE(successor->Restore(recorded).ok());
  // Both go on (step 1 again, as the workers would push it) with sketches
  // that fit: of the opposite sign, which bring the state back toward 0.
  EXPECT_TRUE(round(*core, 1, -1.5e38f).ok());
  EXPECT_TRUE(round(*successor, 1, -1.5e38f).ok());
}

// A worker of a topk group pushing every coordinate (well-formed, finite)
// is refused by name: the union answered to every worker stays within the
// workers' k each, and the round goes on with an honest payload.
TEST(AggregationCoreTest, ASparsePushOfMoreThanKEntriesIsRefused) {
  auto core = MakeCore(2, {{0, 1000, "topk:k=5"}});
  Payload everything;
  everything.kind = PayloadKind::kSparse;
  everything.dim = 1000;
  for (uint32_t i = 0; i < 1000; ++i) {
    everything.indices.push_back(i);
    everything.values.push_back(1);
  }
  Answer refused;
  core->Push({"job", 0, 0}, 1, everything, kT0, refused.Callback());
  ASSERT_TRUE(refused.called);
  EXPECT_EQ(refused.result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.result.status().message().find("topk:k=5 sends at most 5 entries"), std::string::npos)
      << refused.result.status();
  EXPECT_EQ(core->stats().rounds_open, 0u);
  Answer a, b;
  core->Push({"job", 0, 0}, 0, Encode("topk:k=5", GaussianVector(1000, 1)), kT0, a.Callback());
  core->Push({"job", 0, 0}, 1, Encode("topk:k=5", GaussianVector(1000, 2)), kT0, b.Callback());
  ASSERT_TRUE(b.result.ok()) << b.result.status();
  EXPECT_LE(b.result->update->indices.size(), 10u);
}

TEST(AggregationCoreTest, TopKPsReselectsTheTopKOfTheUnion) {
  auto core = MakeCore(3, {{0, 5000, "topk:k=50", 50}});
  Payload sum;
  Answer answers[3];
  for (uint32_t w = 0; w < 3; ++w) {
    Payload p = Encode("topk:k=50", GaussianVector(5000, 40 + w));
    if (w == 0) sum = p;
    else ASSERT_TRUE(MergeInto(p, &sum).ok());
    core->Push({"job", 0, 0}, w, std::move(p), kT0, answers[w].Callback());
  }
  ASSERT_TRUE(answers[0].result.ok());
  const Update& u = *answers[0].result->update;
  ASSERT_EQ(u.indices.size(), 50u);
  // Every kept magnitude is at least every dropped one.
  float min_kept = INFINITY;
  for (float v : u.values) min_kept = std::min(min_kept, std::abs(v));
  for (size_t j = 0; j < sum.indices.size(); ++j) {
    if (!std::binary_search(u.indices.begin(), u.indices.end(), sum.indices[j])) {
      EXPECT_LE(std::abs(sum.values[j]), min_kept);
    }
  }
}

TEST(AggregationCoreTest, ManyWorkerThreadsManyGroupsAndSteps) {
  constexpr uint32_t kWorkers = 4, kGroups = 3, kSteps = 40;
  std::vector<GroupSpec> groups;
  for (uint32_t g = 0; g < kGroups; ++g) groups.push_back({g, 64, "dense"});
  // Each thread pushes every step at once, far ahead of what a worker does.
  auto core = MakeCore(kWorkers, groups, absl::Seconds(10), [](AggregationConfig& c) { c.max_rounds_alone = kSteps; });
  std::atomic<int> ok{0}, bad{0};
  std::vector<std::thread> threads;
  for (uint32_t w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      for (uint64_t step = 0; step < kSteps; ++step) {
        for (uint32_t g = 0; g < kGroups; ++g) {
          // Worker w contributes w + 1 everywhere: the sum is 1 + 2 + 3 + 4.
          std::vector<float> v(64, static_cast<float>(w + 1));
          core->Push({"job", step, g}, w, Encode("dense", v), kT0,
                     [&](absl::StatusOr<RoundResult> r) {
                       if (r.ok() && r->update->values == std::vector<float>(64, 10.0f)) ++ok;
                       else ++bad;
                     });
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(ok.load(), static_cast<int>(kWorkers * kGroups * kSteps));
  const AggregationCore::Stats stats = core->stats();
  EXPECT_EQ(stats.rounds_completed, kGroups * kSteps);
  EXPECT_EQ(stats.rounds_open, 0u);
}

TEST(AggregationCoreTest, ShutdownFailsOpenRounds) {
  auto core = MakeCore(2, {{0, 2, "dense"}});
  Answer a;
  core->Push({"job", 0, 0}, 0, Encode("dense", {1, 1}), kT0, a.Callback());
  EXPECT_EQ(core->FailAllRounds(absl::UnavailableError("server shutting down")), 1);
  EXPECT_EQ(a.result.status().code(), absl::StatusCode::kUnavailable);
}

TEST(AggregationCoreTest, RefusesBadConfigurations) {
  AggregationConfig config;
  config.job = "job";
  config.world_size = 2;
  config.groups = {{0, 10, "dense"}};
  EXPECT_TRUE(AggregationCore::Create(config).ok());
  auto refused = [](AggregationConfig c, absl::string_view needle) {
    absl::Status s = AggregationCore::Create(c).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(needle), std::string::npos) << s;
  };
  AggregationConfig c = config;
  c.job = "";
  refused(c, "job is empty");
  c = config;
  c.world_size = 0;
  refused(c, "world_size");
  c = config;
  c.groups.push_back({0, 10, "dense"});
  refused(c, "listed twice");
  c = config;
  c.groups = {{0, 0, "dense"}};
  refused(c, "group 0");
  c = config;
  c.groups = {{0, 10, "sketchy"}};
  refused(c, "unknown compressor 'sketchy'");
  c = config;
  c.round_deadline = absl::ZeroDuration();
  refused(c, "round_deadline");
  c = config;
  c.groups[0].rounds = 0;
  refused(c, "group 0 takes 0 rounds per step; 1 or 2 are served");
  c.groups[0].rounds = 3;
  refused(c, "group 0 takes 3 rounds per step; 1 or 2 are served");
}

// Durable answers: each answer is recorded before any push sees it; a failed
// record fails the round (re-pushable); a successor core that restores the
// recorded answers gives a worker whose reply was lost the same answer.
TEST(AggregationCoreTest, RecordsEachAnswerBeforeAnsweringAndASuccessorServesIt) {
  AggregationConfig config;
  config.job = "job";
  config.world_size = 2;
  config.groups = {{0, 3, "dense"}};
  config.finished_rounds_kept = 2;
  std::vector<KeptAnswer> recorded;
  Answer a, b;
  bool fail_next = true;
  config.record_answer = [&](const KeptAnswer& answer) {
    EXPECT_FALSE(a.called || b.called) << "a push was answered before its answer was recorded";
    if (fail_next) {
      fail_next = false;
      return absl::InternalError("disk full");
    }
    recorded.push_back(answer);
    return absl::OkStatus();
  };
  std::unique_ptr<AggregationCore> core = *AggregationCore::Create(config);
  core->Push({"job", 5, 0}, 0, Encode("dense", {1, 2, 3}), kT0, a.Callback());
  core->Push({"job", 5, 0}, 1, Encode("dense", {10, 20, 30}), kT0, b.Callback());
  ASSERT_TRUE(b.called);
  EXPECT_EQ(b.result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(b.result.status().message().find("could not be recorded (push again): disk full"), std::string::npos)
      << b.result.status();
  EXPECT_TRUE(recorded.empty());
  // Both workers re-push; this time the answer is recorded, then given.
  a.called = b.called = false;
  core->Push({"job", 5, 0}, 1, Encode("dense", {10, 20, 30}), kT0, b.Callback());
  core->Push({"job", 5, 0}, 0, Encode("dense", {1, 2, 3}), kT0, a.Callback());
  ASSERT_TRUE(a.result.ok()) << a.result.status();
  EXPECT_EQ(a.result->update->values, std::vector<float>({11, 22, 33}));
  ASSERT_EQ(recorded.size(), 1u);
  EXPECT_EQ(recorded[0].step, 5u);
  EXPECT_EQ(recorded[0].result.update, a.result->update);

  // The shard dies; its successor takes the answer up and answers worker 1's
  // re-push with it although worker 0 never pushes step 5 again.
  config.record_answer = nullptr;
  std::unique_ptr<AggregationCore> successor = *AggregationCore::Create(config);
  ASSERT_TRUE(successor->Restore(recorded).ok());
  Answer again;
  successor->Push({"job", 5, 0}, 1, Encode("dense", {10, 20, 30}), kT0, again.Callback());
  ASSERT_TRUE(again.called);
  ASSERT_TRUE(again.result.ok()) << again.result.status();
  EXPECT_EQ(again.result->update->values, std::vector<float>({11, 22, 33}));
  EXPECT_EQ(successor->stats().rounds_open, 0u);
}

TEST(AggregationCoreTest, RestoreRefusesAnswersThatDoNotFitAndTakesNothingUp) {
  std::unique_ptr<AggregationCore> core = MakeCore(2, {{0, 3, "dense"}, {1, 100, "topk:k=2"}});
  auto answer = [](uint32_t group, uint64_t step, Update u) {
    return KeptAnswer{group, step, false, RoundResult{std::make_shared<const Update>(std::move(u)), 2}};
  };
  Update dense3;
  dense3.dense = true;
  dense3.dim = 3;
  dense3.values = {1, 2, 3};
  Update sparse;
  sparse.dim = 100;
  sparse.indices = {7, 3};  // not ascending
  sparse.values = {1, 2};
  Update wide = dense3;
  wide.dim = 4;
  wide.values = {1, 2, 3, 4};
  // Candidates without values answer only the first round of a two-round
  // group: group 1 has no second round.
  Update listed;
  listed.dim = 100;
  listed.indices = {3, 7};
  struct Case {
    std::vector<KeptAnswer> answers;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {{answer(9, 1, dense3)}, "does not own group 9"},
      {{answer(0, 1, wide)}, "has 4 elements; the group has 3"},
      {{answer(0, 1, dense3), answer(1, 1, sparse)}, "step 1, group 1"},
      {{answer(0, 1, dense3), answer(0, 1, dense3)}, "two kept answers"},
      {{answer(1, 1, listed)}, "lists candidates without values, but is a final answer"},
  };
  for (const Case& c : cases) {
    absl::Status s = core->Restore(c.answers);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.needle;
    EXPECT_NE(s.message().find(c.needle), std::string::npos) << s;
  }
  // Nothing was taken up: step 1 of group 0 is a new round.
  Answer a;
  core->Push({"job", 1, 0}, 0, Encode("dense", {1, 1, 1}), kT0, a.Callback());
  EXPECT_FALSE(a.called);
  EXPECT_EQ(core->stats().rounds_open, 1u);
}

// A FetchSGD group (count_sketch method=fetchsgd) keeps momentum and error
// sketches across rounds: each completed round steps them once, as a
// FetchSgdState stepped with the summed sketches; every answer is recorded
// with the state after it, and a core restored from the newest record
// continues exactly as the original; a round whose answer cannot be recorded
// leaves the state as it was.
TEST(AggregationCoreTest, FetchSgdGroupsStepSketchSpaceStateAndRecordIt) {
  const size_t n = 8000;
  const std::string spec = "count_sketch:method=fetchsgd,k=40,rows=5,width=10,seed=4,momentum=0.9";
  std::vector<KeptAnswer> recorded;
  bool fail_record = false;
  auto make = [&](std::vector<KeptAnswer>* sink) { return RecordingCore(6, n, spec, sink, &fail_record); };
  std::unique_ptr<AggregationCore> core = make(&recorded);
  auto sketcher = *CompressorRegistry::Default().Create(spec);
  const Compressor::SketchLayout layout = *sketcher->SketchLayoutFor(n);
  FetchSgdState direct = *FetchSgdState::Create(layout.shape, n, layout.heavy_hitters, 0.9f);
  auto run_round = [&](AggregationCore& c, uint64_t step) {
    Payload sum;
    Answer answers[2];
    for (uint32_t w = 0; w < 2; ++w) {
      Payload p = Encode(spec, GaussianVector(n, 100 * step + w), step);
      if (w == 0) sum = p;
      else EXPECT_TRUE(MergeInto(p, &sum).ok());
      c.Push({"job", step, 6}, w, std::move(p), kT0, answers[w].Callback());
    }
    EXPECT_TRUE(answers[1].called);
    return std::make_pair(std::move(answers[1].result), sum);
  };
  for (uint64_t step = 0; step < 3; ++step) {
    auto [result, sum] = run_round(*core, step);
    ASSERT_TRUE(result.ok()) << result.status();
    const Update want = *direct.Step(sum);
    EXPECT_EQ(result->update->indices, want.indices) << "step " << step;
    EXPECT_EQ(result->update->values, want.values) << "step " << step;
    ASSERT_EQ(recorded.size(), step + 1);
    ASSERT_NE(recorded.back().group_state, nullptr);
    EXPECT_EQ(*recorded.back().group_state, direct.Save());
  }
  // A round whose answer cannot be recorded fails (workers push it again)
  // and leaves the state as it was.
  fail_record = true;
  EXPECT_EQ(run_round(*core, 3).first.status().code(), absl::StatusCode::kUnavailable);
  fail_record = false;
  // A restarted shard resumes from the newest record, and both continue alike.
  std::vector<KeptAnswer> successor_records;
  std::unique_ptr<AggregationCore> successor = make(&successor_records);
  ASSERT_TRUE(successor->Restore(recorded).ok());
  auto [original, sum] = run_round(*core, 3);
  auto [resumed, sum_again] = run_round(*successor, 3);
  ASSERT_TRUE(original.ok() && resumed.ok());
  const Update want = *direct.Step(sum);
  EXPECT_EQ(original->update->indices, want.indices);
  EXPECT_EQ(resumed->update->indices, want.indices);
  EXPECT_EQ(resumed->update->values, want.values);
  // A record without the state a FetchSGD group keeps is refused.
  std::vector<KeptAnswer> stateless = recorded;
  stateless.back().group_state = nullptr;
  std::vector<KeptAnswer> unused;
  EXPECT_EQ(make(&unused)->Restore(stateless).code(), absl::StatusCode::kInvalidArgument);
}

TEST(AggregationCoreTest, FetchSgdGroupsHaveNoSecondRound) {
  AggregationConfig config;
  config.job = "job";
  config.world_size = 2;
  GroupSpec group{0, 1000, "count_sketch:method=fetchsgd,k=10"};
  group.rounds = 2;
  config.groups = {group};
  const absl::Status s = AggregationCore::Create(config).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("no second round"), std::string::npos) << s;
}

}  // namespace
}  // namespace sketchfuse
