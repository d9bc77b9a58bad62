// PowerSGD on both routes (powersgd_ps over in-process shards,
// worker/virtual/loopback_shards.h; powersgd_allreduce over a real Gloo group
// of threads), through the workers' step pipeline, at 2, 3 and 5 workers and
// over several steps (so the warm start and error feedback carry over):
//   - every worker of a route applies the same update, bit for bit;
//   - the two routes apply the same updates, within float rounding (they sum
//     the factors in another order), and both equal a plain double-precision
//     reference of the algorithm (common/compressors/power_sgd_reference.h)
//     run on the same gradients: relative tolerance 1e-3 of the update's
//     largest magnitude;
//   - each worker's residual is the reference's, and the warm start it saves
//     is the reference's summed Q;
//   - a checkpointed worker state restores into a fresh scheme, and a state
//     of another size is refused.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/compressor_params.h"
#include "common/compressor_registry.h"
#include "common/compressors/power_sgd.h"
#include "common/compressors/power_sgd_reference.h"
#include "gtest/gtest.h"
#include "worker/collective/collective.h"
#include "worker/collective/local_group.h"
#include "worker/pipeline/job_plan.h"
#include "worker/pipeline/step_pipeline.h"
#include "worker/schemes/scheme_factory.h"
#include "worker/schemes/scheme_registry.h"
#include "worker/virtual/loopback_shards.h"

namespace sketchfuse {
namespace {

namespace ref = power_sgd_reference;

// Layers as (rows, cols): matrices that compress at rank 4, a bias, a
// matrix too small to compress, another large one.
struct Layer {
  uint64_t rows, cols;
};
const std::vector<Layer> kLayers = {{48, 40}, {1, 40}, {5, 6}, {30, 100}, {1, 30}};
constexpr int kSteps = 3;

std::vector<int64_t> LayerSizes() {
  std::vector<int64_t> sizes;
  for (const Layer& l : kLayers) sizes.push_back(static_cast<int64_t>(l.rows * l.cols));
  return sizes;
}

v1::JobConfig Job(const std::string& scheme, uint32_t workers) {
  v1::RunConfig run;
  run.set_workload("test");
  run.set_scheme(scheme);
  run.set_compressor(FindScheme(scheme)->default_compressor_spec);
  run.set_second_round(SecondRoundFor(scheme, false));
  run.set_fusion("2");
  run.set_error_feedback(true);
  run.set_seed(11);
  for (const Layer& l : kLayers) {
    run.add_layer_sizes(l.rows * l.cols);
    run.add_layer_rows(l.rows);
  }
  absl::StatusOr<v1::JobConfig> job = MakeJobConfig("powersgd-routes-test", workers, run);
  EXPECT_TRUE(job.ok()) << job.status();
  return *job;
}

v1::JoinReply JoinedAs(const v1::JobConfig& job, int rank) {
  absl::StatusOr<v1::JoinReply> joined = LoopbackJoinReply(job, rank, 1);
  EXPECT_TRUE(joined.ok()) << joined.status();
  return *joined;
}

// Normal values, different on every worker, layer and step.
std::vector<float> Gradient(int rank, size_t layer, int64_t size, int step) {
  std::mt19937 rng(static_cast<uint32_t>(1000 * step + 37 * rank + layer));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(size);
  for (float& x : g) x = normal(rng);
  return g;
}

struct RouteRun {
  std::vector<std::vector<Update>> updates;             // [step][group], rank 0's
  std::vector<std::vector<GroupState>> states;          // [rank][group], after the last step
};

RouteRun RunRoute(const v1::JobConfig& job) {
  const uint32_t workers = job.world_size();
  absl::StatusOr<std::unique_ptr<LoopbackShards>> shards = LoopbackShards::Create(job, 1);
  EXPECT_TRUE(shards.ok()) << shards.status();
  const std::vector<int64_t> sizes = LayerSizes();
  std::vector<std::vector<std::vector<Update>>> updates(workers);
  RouteRun run;
  run.states.resize(workers);
  const std::vector<absl::Status> ranks = RunOnLocalGlooGroup(workers, [&](Collective& collective) -> absl::Status {
    const int rank = collective.rank();
    SchemeEnvironment environment;
    environment.collective = &collective;
    environment.transport = (*shards)->Transports();
    absl::StatusOr<BuiltScheme> built = MakeScheme(JoinedAs(job, rank), std::move(environment));
    if (!built.ok()) return built.status();
    absl::StatusOr<std::unique_ptr<StepPipeline>> pipeline =
        StepPipeline::Create(sizes, GroupLayouts(job), built->scheme.get());
    if (!pipeline.ok()) return pipeline.status();
    for (int step = 0; step < kSteps; ++step) {
      (*pipeline)->BeginStep(step);
      for (size_t l = 0; l < sizes.size(); ++l) {
        const std::vector<float> g = Gradient(rank, l, sizes[l], step);
        if (absl::Status s = (*pipeline)->AddLayerGradient(static_cast<int>(l), g); !s.ok()) return s;
      }
      (*pipeline)->MarkBackwardEnd();
      absl::StatusOr<std::vector<Update>> step_updates = (*pipeline)->FinishStep(absl::Seconds(60));
      if (!step_updates.ok()) return step_updates.status();
      if (absl::Status s = (*pipeline)->Applied(*step_updates); !s.ok()) return s;
      updates[rank].push_back(*step_updates);
    }
    run.states[rank] = built->scheme->SaveState();
    return absl::OkStatus();
  });
  for (uint32_t r = 0; r < workers; ++r) EXPECT_TRUE(ranks[r].ok()) << "rank " << r << ": " << ranks[r];
  for (uint32_t r = 1; r < workers; ++r) {
    EXPECT_EQ(updates[r].size(), updates[0].size());
    for (size_t step = 0; step < updates[r].size() && step < updates[0].size(); ++step) {
      for (size_t g = 0; g < updates[r][step].size(); ++g) {
        EXPECT_EQ(updates[r][step][g].values, updates[0][step][g].values) << "rank " << r << " step " << step;
      }
    }
  }
  run.updates = updates[0];
  return run;
}

// The group's values of every step's gradient of worker w.
std::vector<std::vector<float>> GroupGradients(const v1::JobConfig& job, int group, int w) {
  std::vector<std::vector<float>> steps;
  const std::vector<int64_t> sizes = LayerSizes();
  uint64_t begin = 0;
  for (int g = 0; g < group; ++g) begin += job.groups(g).dim();
  for (int step = 0; step < kSteps; ++step) {
    std::vector<float> all;
    for (size_t l = 0; l < sizes.size(); ++l) {
      const std::vector<float> g = Gradient(w, l, sizes[l], step);
      all.insert(all.end(), g.begin(), g.end());
    }
    steps.emplace_back(all.begin() + begin, all.begin() + begin + job.groups(group).dim());
  }
  return steps;
}

// The group's blocks as its spec names them (the job plan's shapes).
absl::StatusOr<LowRankLayout> LayoutOf(const v1::GroupConfig& group) {
  absl::StatusOr<CompressorSpec> spec = ParseCompressorSpec(group.compressor());
  if (!spec.ok()) return spec.status();
  absl::StatusOr<std::vector<std::pair<uint64_t, uint64_t>>> blocks = ParseBlockShapes(spec->params.at("shapes"));
  if (!blocks.ok()) return blocks.status();
  return MakeLowRankLayout(*blocks, std::stoull(spec->params.at("rank")), group.dim());
}

double MaxAbs(const ref::Matrix& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

TEST(PowerSgdRoutesTest, BothRoutesApplyTheReferenceUpdatesAtTwoThreeAndFiveWorkers) {
  for (uint32_t workers : {2u, 3u, 5u}) {
    SCOPED_TRACE(absl::StrCat(workers, " workers"));
    const v1::JobConfig job = Job("powersgd_ps", workers);
    ASSERT_EQ(job.groups_size(), 2);
    const RouteRun ps = RunRoute(job);
    const RouteRun ring = RunRoute(Job("powersgd_allreduce", workers));
    ASSERT_EQ(ps.updates.size(), static_cast<size_t>(kSteps));
    ASSERT_EQ(ring.updates.size(), static_cast<size_t>(kSteps));
    bool some_compressed = false;
    for (int g = 0; g < job.groups_size(); ++g) {
      SCOPED_TRACE(absl::StrCat("group ", g, ": ", job.groups(g).compressor()));
      absl::StatusOr<std::unique_ptr<Compressor>> c = CompressorRegistry::Default().Create(job.groups(g).compressor());
      ASSERT_TRUE(c.ok()) << c.status();
      // The layout the spec names, and the first warm start, as every
      // worker draws it.
      absl::StatusOr<LowRankLayout> layout = LayoutOf(job.groups(g));
      ASSERT_TRUE(layout.ok()) << layout.status();
      ASSERT_TRUE((*c)->Encode(std::vector<float>(job.groups(g).dim(), 0.0f), EncodeContext{}).ok());
      ref::Matrix q = ref::ToDouble((*c)->low_rank()->SaveState());
      ASSERT_EQ(q.size(), layout->q_values);
      some_compressed |= layout->q_values > 0;

      std::vector<std::vector<std::vector<float>>> grads;
      for (uint32_t w = 0; w < workers; ++w) grads.push_back(GroupGradients(job, g, static_cast<int>(w)));
      std::vector<ref::Matrix> kept(workers, ref::Matrix(job.groups(g).dim(), 0.0));
      for (int step = 0; step < kSteps; ++step) {
        std::vector<ref::Matrix> m(workers);
        for (uint32_t w = 0; w < workers; ++w) {
          m[w] = kept[w];
          for (size_t e = 0; e < m[w].size(); ++e) m[w][e] += grads[w][step][e];
        }
        const ref::Step want = ref::ReferenceStep(*layout, q, m);
        const double tolerance = 1e-3 * (1 + MaxAbs(want.update));
        for (const RouteRun* route : {&ps, &ring}) {
          const Update& got = route->updates[step][g];
          ASSERT_EQ(got.values.size(), want.update.size()) << (route == &ps ? "ps" : "ring") << " step " << step;
          for (size_t e = 0; e < want.update.size(); ++e) {
            ASSERT_NEAR(got.values[e], want.update[e], tolerance)
                << (route == &ps ? "ps" : "ring") << " step " << step << " at " << e;
          }
        }
        kept = want.kept;
        q = want.next_q;
      }
      // What each worker keeps, and the warm start it saved.
      for (const RouteRun* route : {&ps, &ring}) {
        for (uint32_t w = 0; w < workers; ++w) {
          ASSERT_EQ(route->states[w].size(), static_cast<size_t>(job.groups_size()));
          const GroupState& state = route->states[w][g];
          ASSERT_EQ(state.residual.size(), kept[w].size());
          const double tolerance = 1e-3 * (1 + MaxAbs(kept[w]));
          for (size_t e = 0; e < kept[w].size(); ++e) ASSERT_NEAR(state.residual[e], kept[w][e], tolerance) << w;
          ASSERT_EQ(state.method_state.size(), q.size()) << "the warm start in the checkpoint";
          const double q_tolerance = 1e-3 * (1 + MaxAbs(q));
          for (size_t e = 0; e < q.size(); ++e) ASSERT_NEAR(state.method_state[e], q[e], q_tolerance) << w;
        }
      }
    }
    EXPECT_TRUE(some_compressed) << "the job compresses some matrix";
  }
}

TEST(PowerSgdRoutesTest, AWorkersStateRestoresAndAStateOfAnotherSizeIsRefused) {
  const v1::JobConfig job = Job("powersgd_allreduce", 2);
  const RouteRun run = RunRoute(job);
  ASSERT_EQ(run.states.size(), 2u);
  for (const std::string scheme : {"powersgd_allreduce", "powersgd_ps"}) {
    SCOPED_TRACE(scheme);
    const v1::JobConfig same = Job(scheme, 2);
    absl::StatusOr<std::unique_ptr<LoopbackShards>> shards = LoopbackShards::Create(same, 1);
    ASSERT_TRUE(shards.ok());
    const std::vector<absl::Status> ranks = RunOnLocalGlooGroup(2, [&](Collective& collective) -> absl::Status {
      SchemeEnvironment environment;
      environment.collective = &collective;
      environment.transport = (*shards)->Transports();
      absl::StatusOr<BuiltScheme> built = MakeScheme(JoinedAs(same, collective.rank()), std::move(environment));
      if (!built.ok()) return built.status();
      const std::vector<GroupState>& saved = run.states[collective.rank()];
      if (absl::Status s = built->scheme->RestoreState(saved); !s.ok()) return s;
      if (!(built->scheme->SaveState() == saved)) return absl::InternalError("the restored state differs");
      std::vector<GroupState> bad = saved;
      bad[0].method_state.push_back(1.0f);
      const absl::Status refused = built->scheme->RestoreState(bad);
      if (refused.ok()) return absl::InternalError("a warm start of another size was restored");
      if (refused.code() != absl::StatusCode::kInvalidArgument) return refused;
      return absl::OkStatus();
    });
    for (const absl::Status& s : ranks) EXPECT_TRUE(s.ok()) << s;
  }
}

}  // namespace
}  // namespace sketchfuse
