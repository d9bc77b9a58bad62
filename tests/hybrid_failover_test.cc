// The hybrid scheme (--scheme=auto) over a loopback of in-process shards
// (worker/virtual/loopback_shards.h) and a real Gloo group of four threads: when the
// servers fail, every worker redoes the failed groups by allreduce and stays
// decentralized; when its probes see the servers again, every worker returns
// together. The multi-process tests (tests/fault_recovery_test.cc,
// scripts' launcher failover test) do the same with real servers killed.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/job_config.h"
#include "worker/virtual/loopback_shards.h"
#include "worker/collective/local_group.h"
#include "worker/pipeline/job_plan.h"
#include "worker/pipeline/step_pipeline.h"
#include "worker/schemes/hybrid_scheme.h"
#include "worker/schemes/scheme_factory.h"
#include "worker/schemes/scheme_registry.h"

namespace sketchfuse {
namespace {

constexpr int kWorkers = 4;
const std::vector<int64_t> kLayers = {3000, 200, 5000, 64};

v1::JobConfig HybridJob(const std::string& scheme = "auto", uint32_t round_deadline_ms = 60000) {
  v1::RunConfig run;
  run.set_workload("test");
  run.set_scheme(scheme);
  run.set_compressor(FindScheme(scheme)->default_compressor_spec);
  run.set_second_round(SecondRoundFor(scheme, false));
  run.set_fusion("2");
  run.set_error_feedback(true);
  for (int64_t size : kLayers) run.add_layer_sizes(size);
  absl::StatusOr<v1::JobConfig> job = MakeJobConfig("hybrid-test", kWorkers, run, round_deadline_ms);
  EXPECT_TRUE(job.ok()) << job.status();
  return *job;
}

v1::JoinReply JoinedAs(const v1::JobConfig& job, int rank) {
  absl::StatusOr<v1::JoinReply> joined = LoopbackJoinReply(job, rank, 2);
  EXPECT_TRUE(joined.ok()) << joined.status();
  return *joined;
}

// A worker's gradient of `layer` at `step`: different on every worker and
// step, with a few large coordinates the sketch finds.
std::vector<float> Gradient(int rank, int layer, int64_t size, uint64_t step) {
  std::vector<float> g(size);
  for (int64_t i = 0; i < size; ++i) {
    g[i] = 0.001f * static_cast<float>((i * 7 + rank * 13 + layer * 5 + step * 3) % 101) - 0.05f;
    if (i % 97 == static_cast<int64_t>(step % 97)) g[i] += 2.0f + rank;
  }
  return g;
}

// What one step looked like on one worker.
struct StepSeen {
  std::vector<Update> updates;
  int collective_groups = 0;  // groups whose update came by allreduce
  HybridScheme::Mode mode_after = HybridScheme::Mode::kCentralized;
};

// Runs `steps` steps on every worker. Before step s, between two barriers
// (no exchange in flight anywhere), rank 0 calls between_steps(s).
std::vector<std::vector<StepSeen>> RunCluster(LoopbackShards& shards, const v1::JobConfig& job, int steps,
                                              const std::function<void(int)>& between_steps,
                                              std::vector<std::string>* log, std::vector<int>* switches) {
  std::vector<std::vector<StepSeen>> seen(kWorkers);
  std::mutex log_mu;
  switches->assign(kWorkers, 0);
  const std::vector<absl::Status> ranks = RunOnLocalGlooGroup(kWorkers, [&](Collective& collective) -> absl::Status {
    const int rank = collective.rank();
    SchemeEnvironment environment;
    environment.collective = &collective;
    environment.transport = shards.Transports();
    environment.hybrid.probe_every = 2;
    environment.hybrid.log = [&, rank](const std::string& line) {
      std::lock_guard<std::mutex> lock(log_mu);
      log->push_back(absl::StrCat("rank ", rank, ": ", line));
    };
    absl::StatusOr<BuiltScheme> built = MakeScheme(JoinedAs(job, rank), std::move(environment));
    if (!built.ok()) return built.status();
    auto* hybrid = dynamic_cast<HybridScheme*>(built->scheme.get());
    if (hybrid == nullptr) return absl::InternalError(absl::StrCat(job.run().scheme(), " did not build the hybrid"));
    absl::StatusOr<std::unique_ptr<StepPipeline>> pipeline =
        StepPipeline::Create(kLayers, GroupLayouts(job), built->scheme.get());
    if (!pipeline.ok()) return pipeline.status();
    for (int step = 0; step < steps; ++step) {
      if (absl::Status s = collective.Barrier(); !s.ok()) return s;
      if (rank == 0) between_steps(step);
      if (absl::Status s = collective.Barrier(); !s.ok()) return s;
      (*pipeline)->BeginStep(step);
      for (size_t l = 0; l < kLayers.size(); ++l) {
        std::vector<float> g = Gradient(rank, static_cast<int>(l), kLayers[l], step);
        if (absl::Status s = (*pipeline)->AddLayerGradient(static_cast<int>(l), g); !s.ok()) return s;
      }
      (*pipeline)->MarkBackwardEnd();
      absl::StatusOr<std::vector<Update>> updates = (*pipeline)->FinishStep(absl::Seconds(60));
      if (!updates.ok()) return absl::Status(updates.status().code(),
                                             absl::StrCat("step ", step, ": ", updates.status().message()));
      if (absl::Status s = (*pipeline)->Applied(*updates); !s.ok()) return s;
      seen[rank].push_back({*updates, (*pipeline)->traffic().collective_groups, hybrid->mode()});
    }
    (*switches)[rank] = hybrid->switches();
    return absl::OkStatus();
  });
  for (int r = 0; r < kWorkers; ++r) EXPECT_TRUE(ranks[r].ok()) << "rank " << r << ": " << ranks[r];
  return seen;
}

// What a cluster on two loopback shards did: every worker's steps, the
// route switches logged, each worker's switch count.
struct ClusterRun {
  std::vector<std::vector<StepSeen>> seen;
  std::vector<std::string> log;
  std::vector<int> switches;
};

// RunCluster on two fresh loopback shards of `job`; between_steps(shards, s)
// before step s.
ClusterRun RunOnTwoShards(const v1::JobConfig& job, int steps,
                          const std::function<void(LoopbackShards&, int)>& between_steps) {
  ClusterRun run;
  absl::StatusOr<std::unique_ptr<LoopbackShards>> shards = LoopbackShards::Create(job, 2);
  EXPECT_TRUE(shards.ok()) << shards.status();
  if (!shards.ok()) return run;
  run.seen = RunCluster(
      **shards, job, steps, [&](int step) { between_steps(**shards, step); }, &run.log, &run.switches);
  return run;
}

void ExpectTheSameUpdatesOnEveryWorker(const std::vector<std::vector<StepSeen>>& seen) {
  for (int r = 1; r < kWorkers; ++r) {
    ASSERT_EQ(seen[r].size(), seen[0].size());
    for (size_t step = 0; step < seen[0].size(); ++step) {
      for (size_t g = 0; g < seen[0][step].updates.size(); ++g) {
        const Update& mine = seen[r][step].updates[g];
        const Update& first = seen[0][step].updates[g];
        EXPECT_EQ(mine.indices, first.indices) << "rank " << r << " step " << step << " group " << g;
        EXPECT_EQ(mine.values, first.values) << "rank " << r << " step " << step << " group " << g;
      }
    }
  }
}

TEST(HybridFailoverTest, FallsBackWhenTheServersFailAndReturnsWhenTheyServeAgain) {
  const v1::JobConfig job = HybridJob();
  ASSERT_EQ(job.groups_size(), 2);
  // Servers down before step 3, back (restarted, empty) before step 6.
  const ClusterRun run = RunOnTwoShards(job, 10, [](LoopbackShards& shards, int step) {
    if (step == 3) shards.SetDown(true);
    if (step == 6) shards.SetDown(false);
  });
  const std::vector<std::vector<StepSeen>>& seen = run.seen;
  const std::vector<std::string>& log = run.log;
  const std::vector<int>& switches = run.switches;
  ASSERT_EQ(seen[0].size(), 10u);
  ExpectTheSameUpdatesOnEveryWorker(seen);
  for (int r = 0; r < kWorkers; ++r) {
    for (int step = 0; step < 10; ++step) {
      const StepSeen& s = seen[r][step];
      // Steps 0-2 centralized; step 3 fails there and is redone by
      // allreduce; 4-7 decentralized (the probe after step 5 still sees the
      // servers down, the one after step 7 sees them up); 8-9 centralized.
      const bool by_allreduce = step >= 3 && step <= 7;
      EXPECT_EQ(s.collective_groups, by_allreduce ? 2 : 0) << "rank " << r << " step " << step;
      EXPECT_EQ(s.mode_after, step >= 3 && step < 7 ? HybridScheme::Mode::kDecentralized
                                                    : HybridScheme::Mode::kCentralized)
          << "rank " << r << " step " << step;
      for (const Update& update : s.updates) {
        EXPECT_FALSE(update.indices.empty()) << "rank " << r << " step " << step;
      }
    }
    EXPECT_EQ(switches[r], 2) << "rank " << r;
  }
  EXPECT_THAT(log, ::testing::Contains(::testing::HasSubstr(
                       "rank 0: auto: step 3: the aggregation servers failed group(s) 0,1")));
  EXPECT_THAT(log, ::testing::Contains(::testing::HasSubstr(
                       "rank 2: auto: step 7: every worker sees every aggregation server healthy")));
}

TEST(HybridFailoverTest, AGroupThatFailsOnOneWorkerIsRedoneByAllOfThem) {
  const v1::JobConfig job = HybridJob();
  // At step 2 only worker 2 loses its replies: the others' rounds complete.
  const ClusterRun run =
      RunOnTwoShards(job, 3, [](LoopbackShards& shards, int step) { shards.LoseRepliesTo(2, step == 2); });
  const std::vector<std::vector<StepSeen>>& seen = run.seen;
  const std::vector<std::string>& log = run.log;
  ASSERT_EQ(seen[0].size(), 3u);
  ExpectTheSameUpdatesOnEveryWorker(seen);
  for (int r = 0; r < kWorkers; ++r) {
    EXPECT_EQ(seen[r][1].collective_groups, 0) << "rank " << r;
    EXPECT_EQ(seen[r][2].collective_groups, 2) << "rank " << r;
    EXPECT_EQ(seen[r][2].mode_after, HybridScheme::Mode::kDecentralized);
  }
  EXPECT_THAT(log, ::testing::Contains(::testing::HasSubstr("rank 0: auto: step 2: the aggregation servers failed "
                                                            "group(s) 0,1 on another worker")));
  EXPECT_THAT(log, ::testing::Contains(::testing::HasSubstr("rank 2: auto: step 2: the aggregation servers failed "
                                                            "group(s) 0,1 (here: UNAVAILABLE")));
}

// The two-round hybrid: the shards fail (both rounds answer UNAVAILABLE),
// the workers redo the groups with fixed_sketch_allreduce (both rounds over
// the collective) and come back to fixed_sketch_ps; one worker losing its
// replies sends every worker to the fallback (the others' second round
// waits for it until the round deadline, 2 s here).
TEST(HybridFailoverTest, TheFixedSketchHybridFallsBackWithBothRoundsAndReturns) {
  const v1::JobConfig job = HybridJob("fixed_sketch_auto", /*round_deadline_ms=*/2000);
  ASSERT_TRUE(job.run().second_round());
  const ClusterRun run = RunOnTwoShards(job, 12, [](LoopbackShards& shards, int step) {
    if (step == 3) shards.SetDown(true);
    if (step == 6) shards.SetDown(false);
    shards.LoseRepliesTo(1, step == 10);
  });
  const std::vector<std::vector<StepSeen>>& seen = run.seen;
  const std::vector<std::string>& log = run.log;
  const std::vector<int>& switches = run.switches;
  ASSERT_EQ(seen[0].size(), 12u);
  ExpectTheSameUpdatesOnEveryWorker(seen);
  for (int r = 0; r < kWorkers; ++r) {
    for (int step = 0; step < 12; ++step) {
      const StepSeen& s = seen[r][step];
      const bool by_allreduce = (step >= 3 && step <= 7) || step >= 10;
      EXPECT_EQ(s.collective_groups, by_allreduce ? 2 : 0) << "rank " << r << " step " << step;
      for (size_t g = 0; g < s.updates.size(); ++g) {
        const uint64_t k = *SpecSelectionSize(job.groups(g).compressor(), job.groups(g).dim());
        EXPECT_EQ(s.updates[g].indices.size(), k) << "rank " << r << " step " << step << " group " << g;
      }
    }
    EXPECT_EQ(switches[r], 3) << "rank " << r;
  }
  EXPECT_THAT(log, ::testing::Contains(::testing::HasSubstr(
                       "rank 0: fixed_sketch_auto: step 3: the aggregation servers failed group(s) 0,1")));
  EXPECT_THAT(log, ::testing::Contains(::testing::HasSubstr("redoing them with fixed_sketch_allreduce")));
  EXPECT_THAT(log, ::testing::Contains(::testing::HasSubstr(
                       "rank 2: fixed_sketch_auto: step 7: every worker sees every aggregation server healthy; "
                       "returning to fixed_sketch_ps")));
  EXPECT_THAT(log, ::testing::Contains(::testing::HasSubstr("rank 1: fixed_sketch_auto: step 10: the aggregation "
                                                            "servers failed group(s) 0,1 (here: UNAVAILABLE")));
}

}  // namespace
}  // namespace sketchfuse
