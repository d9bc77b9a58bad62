// The rounds algorithm bound to its two reducers: the aggregation shards
// (in-process AggregationCores behind loopback transports, the servers' own
// aggregation) and the workers' collective (an in-process group that sums
// as Gloo's ring does). On integer-valued gradients every float sum is
// exact, so whatever the order of addition both routes must give every
// worker the same update, to the bit, and that update must be the reference
// computed directly from the workers' vectors.
#include "worker/rounds/exchange_rounds.h"

#include <algorithm>
#include <cmath>
#include <future>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/compressor.h"
#include "common/compressor_registry.h"
#include "gtest/gtest.h"
#include "proto/job_config.pb.h"
#include "worker/collective/in_process_collective.h"
#include "worker/rounds/collective_reducer.h"
#include "worker/rounds/shard_reducer.h"
#include "worker/virtual/loopback_shards.h"

namespace sketchfuse {
namespace {

struct Method {
  std::string name;
  std::string spec;  // with K for the selection size
  uint32_t rounds;
  bool reselect;     // the final round keeps the top k
};

std::string WithK(const std::string& spec, uint64_t k) {
  std::string out = spec;
  const size_t at = out.find("K");
  if (at != std::string::npos) out.replace(at, 1, std::to_string(k));
  return out;
}

// Worker w's vector: small integers, so every sum of them is exact in float.
std::vector<float> IntegerVector(uint64_t dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> value(-64, 64);
  std::vector<float> x(dim);
  for (float& v : x) v = static_cast<float>(value(rng));
  return x;
}

struct Worker {
  std::vector<float> encoded;
  std::shared_ptr<const Payload> payload;
  std::unique_ptr<Compressor> compressor;  // this worker's decoder on the collective
};

std::vector<Worker> Encode(const std::string& spec, int world, uint64_t dim, uint64_t step) {
  std::vector<Worker> workers(world);
  for (int w = 0; w < world; ++w) {
    workers[w].encoded = IntegerVector(dim, 1000 * static_cast<uint32_t>(step) + 31 * w + static_cast<uint32_t>(dim));
    workers[w].compressor = *CompressorRegistry::Default().Create(spec);
    EncodeContext context;
    context.step = step;
    absl::StatusOr<Payload> payload = workers[w].compressor->Encode(workers[w].encoded, context);
    EXPECT_TRUE(payload.ok()) << payload.status();
    workers[w].payload = std::make_shared<const Payload>(*std::move(payload));
  }
  return workers;
}

RoundsInput InputOf(const Worker& worker, uint64_t step, uint32_t rounds) {
  RoundsInput input;
  input.step = step;
  input.group = 0;
  input.rounds = rounds;
  input.payload = worker.payload;
  input.exact_values = ExactValuesFromHost(worker.encoded);
  input.low_rank = worker.compressor->low_rank();  // PowerSGD's; null for the others
  return input;
}

v1::JobConfig Job(const Method& method, const std::string& spec, int world, uint64_t dim, uint64_t k) {
  v1::JobConfig job;
  job.set_job("rounds");
  job.set_world_size(world);
  job.set_round_deadline_ms(20000);
  job.mutable_run()->set_second_round(method.rounds > 1);
  job.mutable_run()->add_layer_sizes(dim);
  v1::GroupConfig* group = job.add_groups();
  group->set_group(7);
  group->set_dim(dim);
  group->set_layer_begin(0);
  group->set_layer_end(1);
  group->set_compressor(spec);
  if (method.reselect) group->set_reselect_top_k(k);
  return job;
}

// Every worker's outcome through the shards.
std::vector<absl::StatusOr<RoundsOutcome>> ThroughShards(const Method& method, const std::string& spec,
                                                         const std::vector<Worker>& workers, uint64_t dim, uint64_t k,
                                                         uint64_t step) {
  const int world = static_cast<int>(workers.size());
  absl::StatusOr<std::unique_ptr<LoopbackShards>> shards = LoopbackShards::Create(Job(method, spec, world, dim, k), 1);
  EXPECT_TRUE(shards.ok()) << shards.status();
  std::vector<std::unique_ptr<PsTransport>> transports;
  std::vector<std::unique_ptr<ShardReducer>> reducers;
  std::vector<std::promise<absl::StatusOr<RoundsOutcome>>> done(world);
  for (int w = 0; w < world; ++w) {
    transports.push_back((*shards)->Transports()({"loopback"}));
    reducers.push_back(std::make_unique<ShardReducer>(transports.back().get(), "rounds", w,
                                                      std::vector<uint32_t>{7}, std::vector<int>{0}));
  }
  for (int w = 0; w < world; ++w) {
    ExchangeRounds(*reducers[w], InputOf(workers[w], step, method.rounds),
                   [&done, w](absl::StatusOr<RoundsOutcome> outcome) { done[w].set_value(std::move(outcome)); });
  }
  std::vector<absl::StatusOr<RoundsOutcome>> outcomes;
  for (int w = 0; w < world; ++w) outcomes.push_back(done[w].get_future().get());
  return outcomes;
}

// Every worker's outcome through the collective, each rank on a thread.
std::vector<absl::StatusOr<RoundsOutcome>> ThroughCollective(const Method& method, std::vector<Worker>& workers,
                                                             uint64_t k, uint64_t step) {
  const int world = static_cast<int>(workers.size());
  InProcessGroup group(world, absl::Seconds(20));
  std::vector<absl::StatusOr<RoundsOutcome>> outcomes(world, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int w = 0; w < world; ++w) {
    threads.emplace_back([&, w] {
      std::unique_ptr<Collective> rank = group.Rank(w);
      Compressor* decoder = workers[w].compressor.get();
      FactorRoundCheck factor_check;
      if (decoder->sums_factor_rounds()) {
        factor_check = [decoder](uint32_t round, const Payload& p) { return decoder->CheckFactorRound(round, p); };
      }
      CollectiveReducer reducer(*rank, RoundRule{method.rounds, method.reselect ? k : 0},
                                [decoder](Payload sum) { return decoder->Decode(sum); }, factor_check);
      ExchangeRounds(reducer, InputOf(workers[w], step, method.rounds),
                     [&outcomes, w](absl::StatusOr<RoundsOutcome> outcome) { outcomes[w] = std::move(outcome); });
    });
  }
  for (std::thread& t : threads) t.join();
  return outcomes;
}

class ExchangeRoundsTest : public testing::TestWithParam<std::tuple<int, uint64_t>> {};

TEST_P(ExchangeRoundsTest, BothReducersGiveEveryWorkerTheReferenceUpdate) {
  const auto [world, dim] = GetParam();
  const uint64_t k = std::max<uint64_t>(1, dim / 50);
  const std::vector<Method> methods = {
      {"peel", "count_sketch:method=peel,k=K,rows=4,width=8", 1, false},
      {"estimate with the exact second round", "count_sketch:method=estimate,k=K,rows=3,width=10", 2, false},
      {"fixed-size sketch", "count_sketch:method=candidates,k=K,rows=1,width=2,candidates=2", 2, true},
      {"dense", "dense", 1, false},
      {"top-k union", "topk:k=K", 1, false},
      {"top-k union re-selected", "topk:k=K", 1, true},
  };
  for (const Method& method : methods) {
    for (uint64_t step : {0, 3}) {
      SCOPED_TRACE(testing::Message() << method.name << ", " << world << " workers, dim " << dim << ", step " << step);
      const std::string spec = WithK(method.spec, k);
      std::vector<Worker> workers = Encode(spec, world, dim, step);
      const std::vector<absl::StatusOr<RoundsOutcome>> centralized =
          ThroughShards(method, spec, workers, dim, k, step);
      const std::vector<absl::StatusOr<RoundsOutcome>> decentralized = ThroughCollective(method, workers, k, step);
      // The exact sums of the workers' vectors.
      std::vector<double> sum(dim, 0.0);
      for (const Worker& w : workers) {
        for (uint64_t i = 0; i < dim; ++i) sum[i] += w.encoded[i];
      }
      for (int w = 0; w < world; ++w) {
        ASSERT_TRUE(centralized[w].ok()) << "worker " << w << ": " << centralized[w].status();
        ASSERT_TRUE(decentralized[w].ok()) << "worker " << w << ": " << decentralized[w].status();
        const Update& a = centralized[w]->update;
        const Update& b = decentralized[w]->update;
        const Update& first = centralized[0]->update;
        EXPECT_EQ(a.dense, b.dense);
        EXPECT_EQ(a.indices, b.indices) << "worker " << w;
        EXPECT_EQ(a.values, b.values) << "worker " << w;
        EXPECT_EQ(a.indices, first.indices) << "worker " << w;
        EXPECT_EQ(a.values, first.values) << "worker " << w;
        EXPECT_GT(decentralized[w]->bytes_sent, 0u);
        EXPECT_GT(centralized[w]->bytes_sent, 0u);
      }
      // The reference: the exact sums, at the update's coordinates.
      const Update& update = centralized[0]->update;
      if (update.dense) {
        ASSERT_EQ(update.values.size(), dim);
        for (uint64_t i = 0; i < dim; ++i) EXPECT_EQ(update.values[i], sum[i]) << "element " << i;
        continue;
      }
      ASSERT_FALSE(update.indices.empty());
      ASSERT_TRUE(std::is_sorted(update.indices.begin(), update.indices.end()));
      if (workers[0].payload->kind == PayloadKind::kSparse) {
        // The union of the workers' top k, each coordinate the sum of the
        // values sent there (the largest k of them where re-selected).
        std::map<uint32_t, double> sent;
        for (const Worker& w : workers) {
          for (size_t j = 0; j < w.payload->indices.size(); ++j) sent[w.payload->indices[j]] += w.payload->values[j];
        }
        if (!method.reselect) EXPECT_EQ(update.indices.size(), sent.size());
        for (size_t j = 0; j < update.indices.size(); ++j) {
          ASSERT_EQ(sent.count(update.indices[j]), 1u) << "coordinate " << update.indices[j] << " was not sent";
          EXPECT_EQ(update.values[j], sent[update.indices[j]]) << "coordinate " << update.indices[j];
        }
        if (method.reselect) {
          EXPECT_EQ(update.indices.size(), std::min<size_t>(k, sent.size()));
          float smallest_kept = INFINITY;
          for (float v : update.values) smallest_kept = std::min(smallest_kept, std::fabs(v));
          for (const auto& [i, v] : sent) {
            if (!std::binary_search(update.indices.begin(), update.indices.end(), i)) {
              EXPECT_LE(std::fabs(v), smallest_kept) << "coordinate " << i << " dropped";
            }
          }
        }
        continue;
      }
      // A one-round peel's values are its decode's (on data of so few
      // distinct values some cells look pure and are not: the decode's
      // quality is sketch_peeling_test's subject); both routes agreed on
      // them above. A later round's values are the exact sums.
      if (method.rounds == 1) continue;
      for (size_t j = 0; j < update.indices.size(); ++j) {
        EXPECT_EQ(update.values[j], sum[update.indices[j]]) << "coordinate " << update.indices[j];
      }
      if (method.reselect) {
        EXPECT_LE(update.indices.size(), k);
        // The k largest of the exact sums at the candidates: nothing dropped
        // is larger than what was kept.
        float smallest_kept = INFINITY;
        for (float v : update.values) smallest_kept = std::min(smallest_kept, std::fabs(v));
        const Update candidates = *workers[0].compressor->Decode([&] {
          Payload total = *workers[0].payload;
          for (int w = 1; w < world; ++w) EXPECT_TRUE(MergeInto(*workers[w].payload, &total).ok());
          return total;
        }());
        for (uint32_t i : candidates.indices) {
          if (!std::binary_search(update.indices.begin(), update.indices.end(), i)) {
            EXPECT_LE(std::fabs(sum[i]), smallest_kept) << "candidate " << i << " dropped";
          }
        }
      }
    }
  }
}

// PowerSGD's two rounds of factors on both reducers, at 2, 3 and 5 workers:
// every worker of a route applies the same update; the shards, which sum in
// worker order, give the bits of the workers' compressors summed in that
// order here (the math itself is checked against the paper's algorithm in
// //common:power_sgd_test); the ring, which sums in its own order, within
// 1e-4 relative; and every worker keeps what its own factors missed.
class LowRankRoundsTest : public testing::TestWithParam<int> {};

TEST_P(LowRankRoundsTest, BothReducersCarryPowerSgdsFactors) {
  const int world = GetParam();
  const std::string spec = "powersgd:rank=2,seed=3,shapes=20x25.7.9x30";
  const uint64_t dim = 20 * 25 + 7 + 9 * 30;
  const Method method{"powersgd", spec, 2, false};
  for (uint64_t step : {0, 3}) {
    SCOPED_TRACE(testing::Message() << world << " workers, step " << step);
    std::vector<Worker> for_shards = Encode(spec, world, dim, step);
    const std::vector<absl::StatusOr<RoundsOutcome>> centralized =
        ThroughShards(method, spec, for_shards, dim, 0, step);
    std::vector<Worker> for_ring = Encode(spec, world, dim, step);
    const std::vector<absl::StatusOr<RoundsOutcome>> decentralized = ThroughCollective(method, for_ring, 0, step);
    // The same rounds summed here in worker order.
    std::vector<Worker> here = Encode(spec, world, dim, step);
    Payload p_sum = *here[0].payload;
    for (int w = 1; w < world; ++w) ASSERT_TRUE(MergeInto(*here[w].payload, &p_sum).ok());
    const Update first = *here[0].compressor->Decode(p_sum);
    Payload q_sum;
    for (int w = 0; w < world; ++w) {
      absl::StatusOr<Payload> q = here[w].compressor->low_rank()->SecondRound(first);
      ASSERT_TRUE(q.ok()) << q.status();
      if (w == 0) {
        q_sum = *q;
      } else {
        ASSERT_TRUE(MergeInto(*q, &q_sum).ok());
      }
    }
    Update second;
    second.dense = true;
    second.dim = q_sum.values.size();
    second.values = q_sum.values;
    for (int w = 0; w < world; ++w) {
      absl::StatusOr<LowRankRounds::Outcome> want = here[w].compressor->low_rank()->Finish(first, second);
      ASSERT_TRUE(want.ok()) << want.status();
      ASSERT_TRUE(centralized[w].ok()) << "worker " << w << ": " << centralized[w].status();
      ASSERT_TRUE(decentralized[w].ok()) << "worker " << w << ": " << decentralized[w].status();
      EXPECT_EQ(centralized[w]->update.values, want->update.values) << "worker " << w;
      EXPECT_EQ(*centralized[w]->kept, want->kept) << "worker " << w;
      EXPECT_EQ(decentralized[w]->update.values, decentralized[0]->update.values) << "worker " << w;
      ASSERT_EQ(decentralized[w]->update.values.size(), dim);
      for (uint64_t i = 0; i < dim; ++i) {
        const float a = decentralized[w]->update.values[i], b = want->update.values[i];
        ASSERT_NEAR(a, b, 1e-4 * (1 + std::fabs(b))) << "element " << i;
        ASSERT_NEAR((*decentralized[w]->kept)[i], want->kept[i], 1e-4 * (1 + std::fabs(want->kept[i])));
      }
      EXPECT_GT(centralized[w]->bytes_sent, 0u);
      EXPECT_GT(decentralized[w]->bytes_sent, 0u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Workers, LowRankRoundsTest, testing::Values(2, 3, 5));

INSTANTIATE_TEST_SUITE_P(Sizes, ExchangeRoundsTest,
                         testing::Combine(testing::Values(2, 3, 5), testing::Values(uint64_t{500}, uint64_t{4099})));

// A reducer that answers each round from a script, inline.
class ScriptedReducer final : public RoundReducer {
 public:
  explicit ScriptedReducer(std::vector<absl::StatusOr<RoundAnswer>> answers) : answers_(std::move(answers)) {}
  void Reduce(const GroupRound& round, std::shared_ptr<const Payload> payload, RoundDone done) override {
    rounds_.push_back(round.round);
    payloads_.push_back(payload);
    done(answers_.at(round.round));
  }
  std::vector<uint32_t> rounds_;
  std::vector<std::shared_ptr<const Payload>> payloads_;

 private:
  std::vector<absl::StatusOr<RoundAnswer>> answers_;
};

RoundAnswer Answer(uint64_t dim, std::vector<uint32_t> indices, std::vector<float> values, size_t bytes) {
  RoundAnswer a;
  a.update.dim = dim;
  a.update.indices = std::move(indices);
  a.update.values = std::move(values);
  a.bytes_sent = bytes;
  a.bytes_received = 2 * bytes;
  return a;
}

std::shared_ptr<const Payload> Sketch(uint64_t dim) {
  auto p = std::make_shared<Payload>();
  p->kind = PayloadKind::kSketch;
  p->dim = dim;
  p->values = {1, 2, 3, 4};
  return p;
}

absl::StatusOr<RoundsOutcome> RunInline(RoundReducer& reducer, RoundsInput input) {
  absl::StatusOr<RoundsOutcome> result = absl::UnknownError("done did not run");
  int calls = 0;
  ExchangeRounds(reducer, std::move(input), [&](absl::StatusOr<RoundsOutcome> outcome) {
    ++calls;
    result = std::move(outcome);
  });
  EXPECT_EQ(calls, 1);
  return result;
}

TEST(ExchangeRoundsScriptTest, ALaterRoundSendsTheEncodedValuesAtTheCandidatesCapped) {
  ScriptedReducer reducer({Answer(6, {1, 4}, {}, 10), Answer(6, {4}, {9}, 3)});
  const std::vector<float> encoded = {0, 10, 20, 30, 40, 50};
  RoundsInput input;
  input.rounds = 2;
  input.payload = Sketch(6);
  input.exact_values = ExactValuesFromHost(encoded);
  input.cap_exact_values = [](absl::Span<float> values) {
    for (float& v : values) v /= 2;
    return absl::OkStatus();
  };
  absl::StatusOr<RoundsOutcome> outcome = RunInline(reducer, input);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(reducer.rounds_, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(reducer.payloads_[0], input.payload);
  const Payload& values = *reducer.payloads_[1];
  EXPECT_EQ(values.kind, PayloadKind::kCandidateValues);
  EXPECT_TRUE(values.indices.empty()) << "a later round carries no indices";
  EXPECT_EQ(values.values, (std::vector<float>{5, 20}));
  EXPECT_EQ(outcome->update.indices, (std::vector<uint32_t>{4}));
  EXPECT_EQ(outcome->bytes_sent, 13u);
  EXPECT_EQ(outcome->bytes_received, 26u);
}

TEST(ExchangeRoundsScriptTest, AFinalCandidateListIsDataLoss) {
  ScriptedReducer reducer({Answer(6, {1, 4}, {}, 1)});
  RoundsInput input;
  input.payload = Sketch(6);
  absl::StatusOr<RoundsOutcome> outcome = RunInline(reducer, input);
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(outcome.status().message().find("2 candidates without values where the update was due"),
            std::string::npos)
      << outcome.status();
}

TEST(ExchangeRoundsScriptTest, ErrorsEndTheExchangeOnce) {
  const std::vector<float> encoded(6, 1.0f);
  {
    // The reducer's error, in either round.
    ScriptedReducer reducer({Answer(6, {1}, {}, 1), absl::UnavailableError("shard down")});
    RoundsInput input;
    input.rounds = 2;
    input.payload = Sketch(6);
    input.exact_values = ExactValuesFromHost(encoded);
    EXPECT_EQ(RunInline(reducer, input).status().code(), absl::StatusCode::kUnavailable);
  }
  {
    // A candidate outside the group cannot start the next round.
    ScriptedReducer reducer({Answer(6, {1, 6}, {}, 1)});
    RoundsInput input;
    input.rounds = 2;
    input.payload = Sketch(6);
    input.exact_values = ExactValuesFromHost(encoded);
    EXPECT_EQ(RunInline(reducer, input).status().code(), absl::StatusCode::kInternal);
    EXPECT_EQ(reducer.rounds_.size(), 1u);
  }
  {
    // A cap that fails stops before the next round is sent.
    ScriptedReducer reducer({Answer(6, {1}, {}, 1)});
    RoundsInput input;
    input.rounds = 2;
    input.payload = Sketch(6);
    input.exact_values = ExactValuesFromHost(encoded);
    input.cap_exact_values = [](absl::Span<float>) { return absl::FailedPreconditionError("on the GPU"); };
    EXPECT_EQ(RunInline(reducer, input).status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(reducer.rounds_.size(), 1u);
  }
  {
    // Exact values that cannot be read (a failed device copy) stop before
    // the next round is sent, with their error.
    ScriptedReducer reducer({Answer(6, {1}, {}, 1)});
    RoundsInput input;
    input.rounds = 2;
    input.payload = Sketch(6);
    input.exact_values = [](absl::Span<const uint32_t>) -> absl::StatusOr<std::vector<float>> {
      return absl::InternalError("copying the residual's values to the host: device lost");
    };
    absl::StatusOr<RoundsOutcome> outcome = RunInline(reducer, input);
    EXPECT_EQ(outcome.status().code(), absl::StatusCode::kInternal);
    EXPECT_NE(outcome.status().message().find("device lost"), std::string::npos) << outcome.status();
    EXPECT_EQ(reducer.rounds_.size(), 1u);
  }
  {
    // A reader that answers another number of values than candidates.
    ScriptedReducer reducer({Answer(6, {1, 4}, {}, 1)});
    RoundsInput input;
    input.rounds = 2;
    input.payload = Sketch(6);
    input.exact_values = [](absl::Span<const uint32_t>) -> absl::StatusOr<std::vector<float>> {
      return std::vector<float>{1.0f};
    };
    absl::StatusOr<RoundsOutcome> outcome = RunInline(reducer, input);
    EXPECT_EQ(outcome.status().code(), absl::StatusCode::kInternal);
    EXPECT_NE(outcome.status().message().find("1 exact values for 2 candidates"), std::string::npos)
        << outcome.status();
    EXPECT_EQ(reducer.rounds_.size(), 1u);
  }
}

TEST(ExactValuesFromHostTest, ReadsTheVectorAtTheCandidatesAndRefusesOutsideIt) {
  const std::vector<float> encoded = {0, 10, 20, 30};
  const ExactValuesAt read = ExactValuesFromHost(encoded);
  absl::StatusOr<std::vector<float>> values = read(std::vector<uint32_t>{3, 0, 2});
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(*values, (std::vector<float>{30, 0, 20}));
  EXPECT_TRUE(read(std::vector<uint32_t>{})->empty());
  absl::StatusOr<std::vector<float>> outside = read(std::vector<uint32_t>{1, 4});
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(outside.status().message().find("candidate 4 is outside the encoded vector of 4"), std::string::npos)
      << outside.status();
}

TEST(ExchangeRoundsScriptTest, RefusesInputsThatCannotRunBeforeReducing) {
  ScriptedReducer reducer({});
  RoundsInput input;
  EXPECT_EQ(RunInline(reducer, input).status().code(), absl::StatusCode::kInvalidArgument);  // no payload
  input.payload = Sketch(6);
  input.rounds = 3;
  EXPECT_EQ(RunInline(reducer, input).status().code(), absl::StatusCode::kInvalidArgument);
  input.rounds = 2;  // without exact_values
  EXPECT_EQ(RunInline(reducer, input).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(reducer.rounds_.empty());
}

TEST(CollectiveReducerTest, RefusesRoundsOutOfOrderAndPayloadsItDoesNotSum) {
  InProcessGroup group(1, absl::Seconds(5));
  std::unique_ptr<Collective> rank = group.Rank(0);
  CollectiveReducer reducer(*rank, RoundRule{2, 0}, [](Payload) -> absl::StatusOr<Update> { return Update(); });
  auto expect = [&](uint32_t round, std::shared_ptr<const Payload> payload, absl::StatusCode code) {
    absl::StatusOr<RoundAnswer> got = absl::UnknownError("not answered");
    reducer.Reduce(GroupRound{0, 0, round}, std::move(payload), [&](absl::StatusOr<RoundAnswer> a) { got = a; });
    EXPECT_EQ(got.status().code(), code) << got.status();
  };
  expect(1, Sketch(6), absl::StatusCode::kInvalidArgument);  // round 0 first
  auto values = std::make_shared<Payload>();
  values->kind = PayloadKind::kCandidateValues;  // round 0 has no candidates
  values->dim = 6;
  values->values = {1, 2};
  expect(0, values, absl::StatusCode::kInvalidArgument);
  expect(0, nullptr, absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sketchfuse
