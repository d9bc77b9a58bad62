// The two-round fixed-size sketch on its three routes (fixed_sketch_ps over
// in-process shards, worker/virtual/loopback_shards.h; fixed_sketch_allreduce and
// fixed_sketch_auto over a real Gloo group of threads), through the workers'
// step pipeline, at 2, 4 and 8 workers:
//   - the three routes apply the same updates, bit for bit (the gradients are
//     multiples of 1/64 small enough that every sum is exact in any order,
//     so the decoded candidates and the top k cannot differ by rounding);
//   - error feedback conserves the gradient exactly: the workers' residuals
//     plus every applied update are the sum of every gradient;
//   - the bytes a worker pushes per step on the centralized route are the
//     same at every number of workers: its table (2 bytes a cell, bf16 by
//     default) and its candidate values (4 bytes each), plus the request's
//     framing; the hybrid's are the centralized route's, byte for byte; the
//     ring's are two float32 allreduces (the table, the candidate values),
//     each 2(W - 1)/W of its size both ways, and nothing else.
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/compressor_params.h"
#include "gtest/gtest.h"
#include "server/job_config.h"
#include "worker/virtual/loopback_shards.h"
#include "worker/collective/collective.h"
#include "worker/collective/local_group.h"
#include "worker/pipeline/job_plan.h"
#include "worker/pipeline/step_pipeline.h"
#include "worker/schemes/scheme_factory.h"
#include "worker/schemes/scheme_registry.h"

namespace sketchfuse {
namespace {

const std::vector<int64_t> kLayers = {3000, 200, 5000, 64};
constexpr int kSteps = 4;

// capped: momentum correction (0.9) under a release cap low enough (0.05 x
// the velocity's norm) to bind within kSteps steps; otherwise neither, so
// every value is exact in float.
v1::JobConfig Job(const std::string& scheme, uint32_t workers, bool capped = false) {
  v1::RunConfig run;
  run.set_workload("test");
  run.set_scheme(scheme);
  run.set_compressor(FindScheme(scheme)->default_compressor_spec);
  run.set_second_round(SecondRoundFor(scheme, false));
  run.set_fusion("2");
  run.set_error_feedback(true);
  run.set_seed(5);
  if (capped) {
    run.set_momentum(0.9);
    run.set_release_cap(0.05);
  }
  for (int64_t size : kLayers) run.add_layer_sizes(size);
  absl::StatusOr<v1::JobConfig> job = MakeJobConfig("fixed-sketch-test", workers, run);
  EXPECT_TRUE(job.ok()) << job.status();
  return *job;
}

v1::JoinReply JoinedAs(const v1::JobConfig& job, int rank) {
  absl::StatusOr<v1::JoinReply> joined = LoopbackJoinReply(job, rank, 1);
  EXPECT_TRUE(joined.ok()) << joined.status();
  return *joined;
}

// Multiples of 1/64 below 16 in magnitude, different on every worker, layer
// and step: sums of up to a few thousand of them are exact in float.
std::vector<float> Gradient(int rank, int layer, int64_t size, uint64_t step) {
  std::vector<float> g(size);
  for (int64_t i = 0; i < size; ++i) {
    const int64_t v = (i * 37 + rank * 101 + layer * 7 + static_cast<int64_t>(step) * 13) % 1009 - 504;
    g[i] = static_cast<float>(v) / 64.0f;
    if ((i + rank) % 211 == 0) g[i] += 8.0f;
  }
  return g;
}

struct RouteRun {
  std::vector<std::vector<Update>> updates;  // [step][group], rank 0's
  std::vector<size_t> bytes_sent;            // [step], rank 0's
  std::vector<size_t> bytes_received;        // [step], rank 0's
  std::vector<std::vector<float>> residual_sum;  // [group], over the workers, after the last step
};

RouteRun RunRoute(const v1::JobConfig& job) {
  const std::string& scheme = job.run().scheme();
  const uint32_t workers = job.world_size();
  absl::StatusOr<std::unique_ptr<LoopbackShards>> shards = LoopbackShards::Create(job, 1);
  EXPECT_TRUE(shards.ok()) << shards.status();
  RouteRun run;
  std::vector<std::vector<std::vector<Update>>> updates(workers);
  std::vector<std::vector<GroupState>> states(workers);
  std::vector<size_t> bytes, received;
  const std::vector<absl::Status> ranks = RunOnLocalGlooGroup(workers, [&](Collective& collective) -> absl::Status {
    const int rank = collective.rank();
    SchemeEnvironment environment;
    environment.collective = &collective;
    environment.transport = (*shards)->Transports();
    absl::StatusOr<BuiltScheme> built = MakeScheme(JoinedAs(job, rank), std::move(environment));
    if (!built.ok()) return built.status();
    absl::StatusOr<std::unique_ptr<StepPipeline>> pipeline =
        StepPipeline::Create(kLayers, GroupLayouts(job), built->scheme.get());
    if (!pipeline.ok()) return pipeline.status();
    for (int step = 0; step < kSteps; ++step) {
      (*pipeline)->BeginStep(step);
      for (size_t l = 0; l < kLayers.size(); ++l) {
        const std::vector<float> g = Gradient(rank, static_cast<int>(l), kLayers[l], step);
        if (absl::Status s = (*pipeline)->AddLayerGradient(static_cast<int>(l), g); !s.ok()) return s;
      }
      (*pipeline)->MarkBackwardEnd();
      absl::StatusOr<std::vector<Update>> step_updates = (*pipeline)->FinishStep(absl::Seconds(60));
      if (!step_updates.ok()) return step_updates.status();
      if (absl::Status s = (*pipeline)->Applied(*step_updates); !s.ok()) return s;
      updates[rank].push_back(*step_updates);
      if (rank == 0) {
        bytes.push_back((*pipeline)->traffic().bytes_sent);
        received.push_back((*pipeline)->traffic().bytes_received);
      }
    }
    states[rank] = built->scheme->SaveState();
    return absl::OkStatus();
  });
  for (uint32_t r = 0; r < workers; ++r) EXPECT_TRUE(ranks[r].ok()) << scheme << " rank " << r << ": " << ranks[r];
  for (uint32_t r = 1; r < workers; ++r) {
    for (int step = 0; step < kSteps && step < static_cast<int>(updates[r].size()); ++step) {
      for (size_t g = 0; g < updates[r][step].size(); ++g) {
        EXPECT_EQ(updates[r][step][g].indices, updates[0][step][g].indices) << scheme << " rank " << r;
        EXPECT_EQ(updates[r][step][g].values, updates[0][step][g].values) << scheme << " rank " << r;
      }
    }
  }
  run.updates = updates[0];
  run.bytes_sent = bytes;
  run.bytes_received = received;
  for (int g = 0; g < job.groups_size(); ++g) {
    std::vector<float> sum(job.groups(g).dim(), 0.0f);
    for (uint32_t r = 0; r < workers; ++r) {
      if (states[r].size() != static_cast<size_t>(job.groups_size())) continue;
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += states[r][g].residual[i];
    }
    run.residual_sum.push_back(std::move(sum));
  }
  return run;
}

RouteRun RunRoute(const std::string& scheme, uint32_t workers, bool capped = false) {
  return RunRoute(Job(scheme, workers, capped));
}

// Where a group's layers begin, in the concatenated gradient.
std::vector<int64_t> GroupOffsets(const v1::JobConfig& job) {
  std::vector<int64_t> offsets;
  int64_t offset = 0;
  for (const v1::GroupConfig& group : job.groups()) {
    offsets.push_back(offset);
    offset += static_cast<int64_t>(group.dim());
  }
  return offsets;
}

// A group's fixed-size sketch from its spec: k, the table's rows x
// ceil(width k) cells, the p k candidate values of the second round, and the
// bytes a cell takes on the centralized route (2 for table=bf16, else 4).
struct FixedShape {
  uint64_t k = 0;
  uint64_t cells = 0;
  uint64_t values = 0;
  uint64_t cell_bytes = 4;
};

FixedShape ShapeOf(const v1::GroupConfig& group) {
  const CompressorSpec spec = *ParseCompressorSpec(group.compressor());
  FixedShape shape;
  shape.k = *SpecSelectionSize(group.compressor(), group.dim());
  double width = 0, rows = 0, candidates = 0;
  EXPECT_TRUE(absl::SimpleAtod(spec.params.at("width"), &width));
  EXPECT_TRUE(absl::SimpleAtod(spec.params.at("rows"), &rows));
  EXPECT_TRUE(absl::SimpleAtod(spec.params.at("candidates"), &candidates));
  shape.cells = static_cast<uint64_t>(rows * std::ceil(width * shape.k));
  shape.values = static_cast<uint64_t>(candidates * shape.k);
  shape.cell_bytes = spec.params.count("table") && spec.params.at("table") == "bf16" ? 2 : 4;
  return shape;
}

TEST(FixedSketchTest, TheThreeRoutesApplyTheSameUpdatesAndConserveTheGradient) {
  for (uint32_t workers : {2u, 4u, 8u}) {
    SCOPED_TRACE(absl::StrCat(workers, " workers"));
    const v1::JobConfig job = Job("fixed_sketch_ps", workers);
    ASSERT_EQ(job.groups_size(), 2);
    const RouteRun ps = RunRoute("fixed_sketch_ps", workers);
    const RouteRun allreduce = RunRoute("fixed_sketch_allreduce", workers);
    const RouteRun hybrid = RunRoute("fixed_sketch_auto", workers);
    ASSERT_EQ(ps.updates.size(), static_cast<size_t>(kSteps));
    for (const RouteRun* other : {&allreduce, &hybrid}) {
      ASSERT_EQ(other->updates.size(), ps.updates.size());
      for (int step = 0; step < kSteps; ++step) {
        for (int g = 0; g < job.groups_size(); ++g) {
          EXPECT_EQ(other->updates[step][g].indices, ps.updates[step][g].indices) << "step " << step << " group " << g;
          EXPECT_EQ(other->updates[step][g].values, ps.updates[step][g].values) << "step " << step << " group " << g;
        }
      }
    }
    // k coordinates of each group every step: the top k of the exact sums.
    for (int g = 0; g < job.groups_size(); ++g) {
      const uint64_t k = *SpecSelectionSize(job.groups(g).compressor(), job.groups(g).dim());
      EXPECT_EQ(ps.updates[0][g].indices.size(), k) << "group " << g;
    }
    // Conservation: residuals + applied = every gradient, exactly.
    const std::vector<int64_t> offsets = GroupOffsets(job);
    for (const RouteRun* route : {&ps, &allreduce, &hybrid}) {
      for (int g = 0; g < job.groups_size(); ++g) {
        std::vector<float> total = route->residual_sum[g];
        for (int step = 0; step < kSteps; ++step) {
          const Update& u = route->updates[step][g];
          for (size_t j = 0; j < u.indices.size(); ++j) total[u.indices[j]] += u.values[j];
        }
        std::vector<float> expected(total.size(), 0.0f);
        for (int step = 0; step < kSteps; ++step) {
          for (uint32_t r = 0; r < workers; ++r) {
            int64_t at = 0;
            for (size_t l = 0; l < kLayers.size(); ++l) {
              const std::vector<float> grad = Gradient(r, static_cast<int>(l), kLayers[l], step);
              for (int64_t i = 0; i < kLayers[l]; ++i, ++at) {
                if (at >= offsets[g] && at < offsets[g] + static_cast<int64_t>(expected.size())) {
                  expected[at - offsets[g]] += grad[i];
                }
              }
            }
          }
        }
        ASSERT_EQ(total.size(), expected.size());
        size_t differ = 0;
        for (size_t i = 0; i < total.size(); ++i) differ += total[i] != expected[i];
        EXPECT_EQ(differ, 0u) << "group " << g << ": residuals + applied != gradients";
      }
    }
  }
}

// Under the release cap each worker scales what its second round sends
// (GroupCompressors::CapExactValues): the three routes still apply the same
// updates (the same factors; sums in another order: within float rounding),
// and they apply less than without the cap.
TEST(FixedSketchTest, UnderTheReleaseCapTheRoutesAgreeAndApplyLess) {
  const uint32_t workers = 4;
  ASSERT_TRUE(CapsRelease(Job("fixed_sketch_ps", workers, true).run()));
  const RouteRun ps = RunRoute("fixed_sketch_ps", workers, true);
  const RouteRun allreduce = RunRoute("fixed_sketch_allreduce", workers, true);
  const RouteRun hybrid = RunRoute("fixed_sketch_auto", workers, true);
  ASSERT_EQ(ps.updates.size(), static_cast<size_t>(kSteps));
  for (const RouteRun* other : {&allreduce, &hybrid}) {
    ASSERT_EQ(other->updates.size(), ps.updates.size());
    for (int step = 0; step < kSteps; ++step) {
      for (size_t g = 0; g < ps.updates[step].size(); ++g) {
        const Update& a = other->updates[step][g];
        const Update& b = ps.updates[step][g];
        EXPECT_EQ(a.indices, b.indices) << "step " << step << " group " << g;
        ASSERT_EQ(a.values.size(), b.values.size());
        for (size_t j = 0; j < a.values.size(); ++j) {
          EXPECT_NEAR(a.values[j], b.values[j], 1e-5f * std::fabs(b.values[j])) << "step " << step << " group " << g;
        }
      }
    }
  }
  // Momentum alone (no cap) against the cap: the cap binds on these spiky
  // gradients, and the applied mass is smaller at some step.
  v1::JobConfig uncapped = Job("fixed_sketch_allreduce", workers, true);
  uncapped.mutable_run()->set_release_cap(0);
  EXPECT_FALSE(CapsRelease(uncapped.run()));
  double capped_mass = 0;
  for (const std::vector<Update>& step : allreduce.updates) {
    for (const Update& u : step) {
      for (float v : u.values) capped_mass += std::fabs(v);
    }
  }
  EXPECT_GT(capped_mass, 0);
  // The same arithmetic without the cap.
  const RouteRun free = RunRoute(uncapped);
  double free_mass = 0;
  for (const std::vector<Update>& step : free.updates) {
    for (const Update& u : step) {
      for (float v : u.values) free_mass += std::fabs(v);
    }
  }
  EXPECT_LT(capped_mass, free_mass) << "the cap never bound";
}

// Bytes per worker per step on the centralized route: each group's table and
// candidate values, the same at every number of workers.
TEST(FixedSketchTest, ACentralizedWorkerPushesTheSameBytesAtAnyNumberOfWorkers) {
  // Step by step (the framing's varints grow with the step number).
  std::map<uint32_t, std::vector<size_t>> bytes_at;
  for (uint32_t workers : {2u, 4u, 8u}) {
    bytes_at[workers] = RunRoute("fixed_sketch_ps", workers).bytes_sent;
    ASSERT_EQ(bytes_at[workers].size(), static_cast<size_t>(kSteps));
  }
  EXPECT_EQ(bytes_at[4], bytes_at[2]);
  EXPECT_EQ(bytes_at[8], bytes_at[2]);
  // 2 bytes per cell of a bf16 table (the default: table=bf16) or 4 of a
  // float32 one, 4 per candidate value, plus at most 96 bytes of framing per
  // push (two pushes per group): rows x ceil(width k) cells and candidates
  // x k values, k = density x dim.
  const v1::JobConfig job = Job("fixed_sketch_ps", 4);
  uint64_t payload_bytes = 0;
  for (const v1::GroupConfig& group : job.groups()) {
    const FixedShape shape = ShapeOf(group);
    payload_bytes += shape.cell_bytes * shape.cells + 4 * shape.values;
  }
  for (size_t bytes : bytes_at[2]) {
    EXPECT_GE(bytes, payload_bytes);
    EXPECT_LE(bytes, payload_bytes + 2 * 96 * job.groups_size());
  }
}

// What a centralized worker receives per step: the candidates of each group
// (p k indices, without their estimates) and the k applied coordinates with
// their sums, whatever the number of workers: 1 to VarintBytes(dim - 1)
// bytes an index (packed varints of the gaps between ascending indices,
// proto/payload.proto's index_gaps) and 4 a value, plus framing.
TEST(FixedSketchTest, ACentralizedWorkerReceivesTheSameBytesAtAnyNumberOfWorkers) {
  const auto varint_bytes = [](uint64_t v) {
    uint64_t n = 1;
    while (v >= 128) {
      v >>= 7;
      ++n;
    }
    return n;
  };
  const v1::JobConfig job = Job("fixed_sketch_ps", 4);
  uint64_t indices = 0, values = 0, index_bytes_max = 0;
  for (const v1::GroupConfig& group : job.groups()) {
    const FixedShape shape = ShapeOf(group);
    const uint64_t n = shape.values + shape.k;
    indices += n;
    values += shape.k;
    index_bytes_max += n * varint_bytes(group.dim() - 1);
  }
  for (uint32_t workers : {2u, 4u, 8u}) {
    const RouteRun run = RunRoute("fixed_sketch_ps", workers);
    ASSERT_EQ(run.bytes_received.size(), static_cast<size_t>(kSteps));
    for (size_t received : run.bytes_received) {
      EXPECT_GE(received, 4 * values + indices) << workers << " workers";
      EXPECT_LE(received, 4 * values + index_bytes_max + 2 * 96 * job.groups_size()) << workers << " workers";
    }
  }
}

// The ring and the hybrid at 2, 4 and 8 workers. While its shards answer, the
// hybrid sends and receives what fixed_sketch_ps does, byte for byte. The
// ring allreduces each group's table (summed in float32, whatever the table's
// rounding) and then its p k candidate values, and sends and receives
// 2(W - 1)/W of each (RingAllReduceBytes) and nothing more: no indices. Its
// bytes divided by that factor are the same at every W, within the rounding
// of each allreduce's share to a whole float.
TEST(FixedSketchTest, TheRingMovesItsTwoAllreducesAndTheHybridItsCentralizedBytes) {
  std::map<uint32_t, double> ring_per_factor;
  for (uint32_t workers : {2u, 4u, 8u}) {
    SCOPED_TRACE(absl::StrCat(workers, " workers"));
    const v1::JobConfig job = Job("fixed_sketch_allreduce", workers);
    uint64_t expected = 0;
    uint64_t floats = 0;
    for (const v1::GroupConfig& group : job.groups()) {
      const FixedShape shape = ShapeOf(group);
      expected += RingAllReduceBytes(shape.cells, static_cast<int>(workers)) +
                  RingAllReduceBytes(shape.values, static_cast<int>(workers));
      floats += shape.cells + shape.values;
    }
    const RouteRun ring = RunRoute("fixed_sketch_allreduce", workers);
    ASSERT_EQ(ring.bytes_sent.size(), static_cast<size_t>(kSteps));
    for (int step = 0; step < kSteps; ++step) {
      EXPECT_EQ(ring.bytes_sent[step], expected) << "step " << step;
      EXPECT_EQ(ring.bytes_received[step], expected) << "step " << step;
    }
    const double factor = 2.0 * (workers - 1) / workers;
    ring_per_factor[workers] = static_cast<double>(ring.bytes_sent[0]) / factor;
    // The formula in floats: 4 (cells + p k) 2(W - 1)/W, up to one byte of
    // rounding per group and allreduce.
    EXPECT_NEAR(ring_per_factor[workers], 4.0 * static_cast<double>(floats), 2.0 * job.groups_size() / factor);

    const RouteRun ps = RunRoute("fixed_sketch_ps", workers);
    const RouteRun hybrid = RunRoute("fixed_sketch_auto", workers);
    EXPECT_EQ(hybrid.bytes_sent, ps.bytes_sent);
    EXPECT_EQ(hybrid.bytes_received, ps.bytes_received);
  }
  EXPECT_NEAR(ring_per_factor[4], ring_per_factor[2], 8.0);
  EXPECT_NEAR(ring_per_factor[8], ring_per_factor[2], 8.0);
}

}  // namespace
}  // namespace sketchfuse
