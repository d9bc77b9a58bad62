// The decentralized schemes as the worker runs them (CollectiveScheme over
// real Gloo groups of threads on loopback), over several steps and groups:
//  - every worker receives the same update;
//  - residual conservation with error feedback: the sum of the applied
//    updates plus every worker's residual equals the sum of every gradient
//    (each scheme; sketch_allreduce with its second round, which makes the
//    applied values exact);
//  - jobs the scheme cannot run are refused naming the problem.
#include "worker/schemes/collective_scheme.h"

#include <cmath>
#include <mutex>

#include "common/compressor_registry.h"
#include "common/fetchsgd_state.h"
#include "common/test_vectors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/local_group.h"

namespace sketchfuse {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kDims[] = {1000, 3001};

v1::JobConfig Job(const std::string& scheme, const std::string& compressor, int world, bool second_round) {
  v1::JobConfig job;
  job.set_job("test");
  job.set_world_size(world);
  v1::RunConfig* run = job.mutable_run();
  run->set_scheme(scheme);
  run->set_compressor(compressor);
  run->set_error_feedback(true);
  run->set_second_round(second_round);
  for (size_t g = 0; g < 2; ++g) {
    v1::GroupConfig* group = job.add_groups();
    group->set_group(g);
    group->set_dim(kDims[g]);
    group->set_compressor(compressor);
  }
  return job;
}

std::vector<float> Densify(const Update& u) {
  if (u.dense) return u.values;
  std::vector<float> d(u.dim, 0.0f);
  for (size_t j = 0; j < u.indices.size(); ++j) d[u.indices[j]] += u.values[j];
  return d;
}

struct Case {
  std::string scheme;
  std::string compressor;
  bool second_round = false;
  int world = 3;
  int steps = 4;
};

class ConservationTest : public ::testing::TestWithParam<Case> {};

TEST_P(ConservationTest, AppliedUpdatesPlusResidualsEqualTheGradients) {
  const Case& c = GetParam();
  const int kWorld = c.world, kSteps = c.steps;
  const v1::JobConfig job =
      Job(c.scheme == "sketch_allreduce_peel" ? "sketch_allreduce" : c.scheme, c.compressor, kWorld, c.second_round);
  // Per group: sum of every worker's gradients; the applied updates (rank 0's,
  // checked equal on every rank); every worker's final residual.
  std::vector<std::vector<double>> gradients(2), applied(2), residuals(2), magnitude(2);
  for (int g = 0; g < 2; ++g) {
    gradients[g].assign(kDims[g], 0.0);
    applied[g].assign(kDims[g], 0.0);
    residuals[g].assign(kDims[g], 0.0);
    magnitude[g].assign(kDims[g], 0.0);
  }
  std::vector<std::vector<std::vector<float>>> updates(kWorld);  // [rank][step * 2 + g]
  std::mutex mu;
  const std::vector<absl::Status> statuses = RunOnLocalGlooGroup(kWorld, [&](Collective& collective) {
    absl::StatusOr<std::unique_ptr<CollectiveScheme>> scheme = CollectiveScheme::Create(job, &collective);
    if (!scheme.ok()) return scheme.status();
    const int rank = collective.rank();
    for (int step = 0; step < kSteps; ++step) {
      std::vector<Update> step_updates(2);
      for (int g = 0; g < 2; ++g) {
        const std::vector<float> grad = GaussianVector(kDims[g], 100 * step + 10 * rank + g);
        std::vector<float> params = GaussianVector(kDims[g], 7 + g);
        absl::Status exchange = absl::UnknownError("done not called");
        (*scheme)->Exchange(step, g, grad, params, [&](absl::StatusOr<ExchangeResult> result) {
          exchange = result.status();
          if (result.ok()) step_updates[g] = std::move(result->update);
        });
        if (!exchange.ok()) return exchange;
        std::lock_guard<std::mutex> lock(mu);
        for (size_t i = 0; i < grad.size(); ++i) {
          gradients[g][i] += grad[i];
          magnitude[g][i] += std::abs(grad[i]);
        }
      }
      std::vector<absl::StatusOr<ExchangeResult>> results;
      if (absl::Status s = (*scheme)->Reconcile(step, results); !s.ok()) return s;
      for (int g = 0; g < 2; ++g) {
        if (absl::Status s = (*scheme)->OnApplied(g, step_updates[g]); !s.ok()) return s;
        std::lock_guard<std::mutex> lock(mu);
        updates[rank].push_back(Densify(step_updates[g]));
        if (rank == 0) {
          for (size_t i = 0; i < kDims[g]; ++i) applied[g][i] += updates[rank].back()[i];
        }
      }
    }
    const std::vector<GroupState> state = (*scheme)->SaveState();
    std::lock_guard<std::mutex> lock(mu);
    for (int g = 0; g < 2; ++g) {
      for (size_t i = 0; i < kDims[g]; ++i) residuals[g][i] += state[g].residual[i];
    }
    return absl::OkStatus();
  });
  for (int r = 0; r < kWorld; ++r) ASSERT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
  for (int r = 1; r < kWorld; ++r) EXPECT_EQ(updates[r], updates[0]) << "rank " << r << " applied other updates";
  for (int g = 0; g < 2; ++g) {
    for (size_t i = 0; i < kDims[g]; ++i) {
      ASSERT_NEAR(applied[g][i] + residuals[g][i], gradients[g][i], 1e-5 * magnitude[g][i] + 1e-6)
          << c.scheme << " group " << g << " coordinate " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    EveryScheme, ConservationTest,
    ::testing::Values(Case{"dense_allreduce", "dense"},
                      Case{"sketch_allreduce", "count_sketch:density=0.02,rows=3,width=4", true},
                      Case{"sketch_allreduce_peel", "count_sketch:method=peel,density=0.02,rows=4,width=3", false},
                      Case{"topk_allgather", "topk:density=0.02"}, Case{"gtopk", "topk:density=0.02"},
                      Case{"importance_allreduce", "importance:density=0.02"}, Case{"spardl", "topk:density=0.02"},
                      // gTop-k's give-back over trees of every shape (a full tree, a rank without a partner,
                      // two levels) and more steps, so given-back values are themselves re-sent and dropped.
                      Case{"gtopk", "topk:density=0.02", false, 2, 8}, Case{"gtopk", "topk:density=0.02", false, 4, 8},
                      Case{"gtopk", "topk:density=0.02", false, 5, 8}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return info.param.scheme + (info.param.world == 3 ? "" : "_world" + std::to_string(info.param.world));
    });

// dense_bf16_allreduce as the worker runs it: the sum within bfloat16
// rounding, the same everywhere, and half the bytes of dense_allreduce
// counted (2 per element plus an 8-byte length per message), so the
// reported compression ratio is what was really sent.
TEST(CollectiveSchemeTest, Bf16DenseAllreduceSendsHalfTheBytesOfDense) {
  constexpr int kWorld = 4;
  std::vector<uint64_t> sent(kWorld), sent_dense(kWorld), dense_bytes(kWorld);
  std::vector<std::vector<float>> updates(kWorld), grads(kWorld);
  for (int r = 0; r < kWorld; ++r) grads[r] = GaussianVector(kDims[1], 50 + r);
  const std::vector<absl::Status> statuses = RunOnLocalGlooGroup(kWorld, [&](Collective& collective) {
    const int rank = collective.rank();
    for (const std::string scheme : {"dense_bf16_allreduce", "dense_allreduce"}) {
      absl::StatusOr<std::unique_ptr<CollectiveScheme>> made =
          CollectiveScheme::Create(Job(scheme, "dense", kWorld, false), &collective);
      if (!made.ok()) return made.status();
      absl::Status exchange = absl::UnknownError("done not called");
      (*made)->Exchange(0, 1, grads[rank], {}, [&](absl::StatusOr<ExchangeResult> result) {
        exchange = result.status();
        if (!result.ok()) return;
        (scheme == "dense_allreduce" ? sent_dense : sent)[rank] = result->bytes_sent;
        if (scheme == "dense_allreduce") return;
        dense_bytes[rank] = result->dense_bytes;
        updates[rank] = Densify(result->update);
      });
      if (!exchange.ok()) return exchange;
    }
    return absl::OkStatus();
  });
  for (int r = 0; r < kWorld; ++r) ASSERT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(updates[r], updates[0]) << "rank " << r;
    EXPECT_EQ(dense_bytes[r], 4 * kDims[1]);
    // 2 (P - 1) chunks of about n / P values at 2 bytes, plus 8 bytes each.
    EXPECT_NEAR(static_cast<double>(sent[r]), 2.0 * (kWorld - 1) * (2.0 * kDims[1] / kWorld + 8), 2 * (kWorld - 1) * 2);
    EXPECT_NEAR(static_cast<double>(sent_dense[r]) / sent[r], 2.0, 0.02) << "rank " << r;
  }
  for (size_t i = 0; i < kDims[1]; ++i) {
    double exact = 0, magnitude = 0;
    for (int r = 0; r < kWorld; ++r) {
      exact += grads[r][i];
      magnitude += std::abs(grads[r][i]);
    }
    ASSERT_LE(std::abs(updates[0][i] - exact), kWorld / 256.0 * magnitude + 1e-6) << i;
  }
}

// FetchSGD on the decentralized route: every worker steps its own copy of
// the sketch-space state with the same allreduced sum, so all apply the same
// update, the one a single FetchSgdState computes from the summed sketches;
// a worker restored from another's saved state continues identically. (Two
// ranks: a + b is the same float either way, so the comparison is exact.)
TEST(CollectiveSchemeTest, FetchSgdStepsTheSameSketchStateOnEveryWorker) {
  const std::string spec = "count_sketch:method=fetchsgd,density=0.01,rows=5,width=10,momentum=0.9";
  const v1::JobConfig job = Job("sketch_allreduce", spec, 2, false);
  std::unique_ptr<Compressor> sketcher = *CompressorRegistry::Default().Create(spec);
  std::vector<FetchSgdState> direct;
  for (int g = 0; g < 2; ++g) {
    const Compressor::SketchLayout layout = *sketcher->SketchLayoutFor(kDims[g]);
    direct.push_back(*FetchSgdState::Create(layout.shape, kDims[g], layout.heavy_hitters, 0.9f));
  }
  constexpr int kSteps = 3;
  std::vector<std::vector<Update>> updates(2);
  std::vector<std::vector<GroupState>> saved(2);
  std::mutex mu;
  auto grad_of = [](int step, int rank, int g) { return GaussianVector(kDims[g], 100 * step + 10 * rank + g); };
  const std::vector<absl::Status> statuses = RunOnLocalGlooGroup(2, [&](Collective& collective) {
    absl::StatusOr<std::unique_ptr<CollectiveScheme>> scheme = CollectiveScheme::Create(job, &collective);
    if (!scheme.ok()) return scheme.status();
    for (int step = 0; step < kSteps; ++step) {
      for (int g = 0; g < 2; ++g) {
        absl::Status exchange = absl::UnknownError("done not called");
        Update update;
        (*scheme)->Exchange(step, g, grad_of(step, collective.rank(), g), {}, [&](absl::StatusOr<ExchangeResult> r) {
          exchange = r.status();
          if (r.ok()) update = std::move(r->update);
        });
        if (!exchange.ok()) return exchange;
        if (absl::Status s = (*scheme)->OnApplied(g, update); !s.ok()) return s;
        std::lock_guard<std::mutex> lock(mu);
        updates[collective.rank()].push_back(std::move(update));
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    saved[collective.rank()] = (*scheme)->SaveState();
    return absl::OkStatus();
  });
  for (const absl::Status& s : statuses) ASSERT_TRUE(s.ok()) << s;
  for (int step = 0; step < kSteps; ++step) {
    for (int g = 0; g < 2; ++g) {
      Payload sum = *sketcher->Encode(grad_of(step, 0, g), {});
      ASSERT_TRUE(MergeInto(*sketcher->Encode(grad_of(step, 1, g), {}), &sum).ok());
      const Update want = *direct[g].Step(sum);
      for (int rank = 0; rank < 2; ++rank) {
        const Update& got = updates[rank][2 * step + g];
        EXPECT_EQ(got.indices, want.indices) << "rank " << rank << " step " << step << " group " << g;
        EXPECT_EQ(got.values, want.values) << "rank " << rank << " step " << step << " group " << g;
      }
    }
  }
  // The state is the method's: the sketches, as the direct one's; the
  // workers keep no residual nor velocity.
  EXPECT_EQ(saved[0], saved[1]);
  for (int g = 0; g < 2; ++g) {
    EXPECT_EQ(saved[0][g].method_state, direct[g].Save());
    EXPECT_TRUE(saved[0][g].residual.empty());
    EXPECT_TRUE(saved[0][g].velocity.empty());
  }
  // Restored into a fresh scheme, the state is the same.
  const std::vector<absl::Status> restored = RunOnLocalGlooGroup(2, [&](Collective& collective) {
    absl::StatusOr<std::unique_ptr<CollectiveScheme>> scheme = CollectiveScheme::Create(job, &collective);
    if (!scheme.ok()) return scheme.status();
    if (absl::Status s = (*scheme)->RestoreState(saved[0]); !s.ok()) return s;
    EXPECT_EQ((*scheme)->SaveState(), saved[0]);
    std::vector<GroupState> wrong = saved[0];
    wrong[0].method_state.pop_back();
    EXPECT_EQ((*scheme)->RestoreState(wrong).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ((*scheme)->SaveState(), saved[0]);
    wrong = saved[0];
    wrong[1].residual.assign(kDims[1], 1.0f);  // a part FetchSGD's workers do not keep
    EXPECT_EQ((*scheme)->RestoreState(wrong).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ((*scheme)->SaveState(), saved[0]);
    return absl::OkStatus();
  });
  for (const absl::Status& s : restored) ASSERT_TRUE(s.ok()) << s;
}

TEST(CollectiveSchemeTest, RefusesJobsItCannotRun) {
  const std::vector<absl::Status> statuses = RunOnLocalGlooGroup(2, [](Collective& collective) {
    EXPECT_THAT(CollectiveScheme::Create(Job("sketch_ps", "count_sketch:density=0.02", 2, false), &collective)
                    .status()
                    .message(),
                HasSubstr("not a decentralized scheme"));
    EXPECT_THAT(CollectiveScheme::Create(Job("gtopk", "count_sketch:density=0.02", 2, false), &collective)
                    .status()
                    .message(),
                HasSubstr("needs the topk compressor"));
    EXPECT_THAT(CollectiveScheme::Create(Job("gtopk", "topk:density=0.02", 3, false), &collective).status().message(),
                HasSubstr("the job has 3 workers"));
    EXPECT_THAT(CollectiveScheme::Create(Job("gtopk", "topk:density=0.02", 2, true), &collective).status().message(),
                HasSubstr("--second_round is for --scheme=sketch_ps or sketch_allreduce only; the scheme is gtopk"));
    EXPECT_THAT(CollectiveScheme::Create(Job("sketch_allreduce", "count_sketch:method=fetchsgd", 2, true), &collective)
                    .status()
                    .message(),
                HasSubstr("keeps state where the sum is and has no second round"));
    EXPECT_EQ(CollectiveScheme::Create(Job("gtopk", "topk:density=0.02", 2, false), nullptr).status().code(),
              absl::StatusCode::kInvalidArgument);
    absl::StatusOr<std::unique_ptr<CollectiveScheme>> scheme =
        CollectiveScheme::Create(Job("gtopk", "topk:density=0.02", 2, false), &collective);
    if (!scheme.ok()) return scheme.status();
    // A group out of range and a settlement before any exchange are refused.
    absl::Status exchange;
    (*scheme)->Exchange(0, 5, std::vector<float>(10), {}, [&](absl::StatusOr<ExchangeResult> r) { exchange = r.status(); });
    EXPECT_EQ(exchange.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ((*scheme)->OnApplied(0, Update{}).code(), absl::StatusCode::kFailedPrecondition);
    return absl::OkStatus();
  });
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace sketchfuse
