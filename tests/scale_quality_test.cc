// Training quality of the Count-Sketch routes beyond four workers, with real
// processes on loopback: 8 and 16 sketchfuse_worker processes train the
// main job's Fashion-MNIST MLP (2 epochs of 24,000 examples, batch 32, the
// main job's learning rate and momentum) with dense_allreduce, sketch_ps
// (two shards) and sketch_allreduce at the registry's defaults.
//
// What it holds: the peel table follows the job's world size, so the
// decodes give back ~all the workers inserted (peel_recovered_share >= 0.98)
// and the sketch routes stay near dense. Before, a table sized for four
// workers recovered a fraction at 8 and next to nothing at 16, and the
// routes lost 7 to 10 points at 8 workers and about 23 at 16
// (docs/BENCHMARKS.md, "Scale out: 8 and 16 worker processes"). Margins against dense_allreduce of
// the same seed: 3.5 points at 8 workers, 7 at 16 (measured when this test
// was written: 1.7 to 2.1 at 8, 3.6 to 5.8 at 16; what is left is Top-k's
// own loss on this 94- to 187-step job: topk_allgather loses as much).
// Usage (from Bazel): scale_quality_test <sketchfuse_server> <sketchfuse_worker>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/process_util.h"
#include "tests/training_cluster.h"

namespace sketchfuse {
namespace {

std::vector<WorkerResult> Train(int world, const std::string& scheme, int shards) {
  const std::string name = absl::StrCat(scheme, "_w", world);
  std::vector<std::string> flags = {"--job=scale", absl::StrCat("--world_size=", world), "--workload=mlp",
                                    "--scheme=" + scheme, "--train_examples=24000", "--test_examples=10000",
                                    "--epochs=2", "--batch_size=32", "--seed=1", "--report_every=0"};
  TrainingCluster cluster(daemon_binaries.server, daemon_binaries.worker, absl::StrCat(TestTempDir(), "/", name),
                          flags);
  std::vector<WorkerResult> results = cluster.Train(world, shards);
  EXPECT_EQ(results.size(), static_cast<size_t>(world)) << name;
  const long steps = 2 * (24000 / world / 32);
  for (const WorkerResult& r : results) EXPECT_EQ(r.steps, steps) << name << " did not train every step";
  return results;
}

void ExpectNearDense(int world, double margin) {
  const std::vector<WorkerResult> dense = Train(world, "dense_allreduce", 1);
  ASSERT_FALSE(dense.empty());
  std::printf("%d workers: dense_allreduce %.4f\n", world, dense[0].accuracy);
  for (const auto& [scheme, shards] : std::vector<std::pair<std::string, int>>{{"sketch_ps", 2}, {"sketch_allreduce", 1}}) {
    const std::vector<WorkerResult> results = Train(world, scheme, shards);
    if (results.empty()) continue;
    std::printf("%d workers: %s %.4f, the peel gave back %.4f\n", world, scheme.c_str(), results[0].accuracy,
                results[0].peel_recovered_share);
    EXPECT_GE(results[0].accuracy, dense[0].accuracy - margin) << scheme << " at " << world << " workers";
    for (const WorkerResult& r : results) {
      EXPECT_GE(r.peel_recovered_share, 0.98) << scheme << " at " << world << " workers: the table is too small";
      EXPECT_EQ(r.last_epoch, results[0].last_epoch) << scheme << ": the workers hold different models";
    }
  }
}

TEST(ScaleQualityTest, EightWorkers) { ExpectNearDense(8, 0.035); }

TEST(ScaleQualityTest, SixteenWorkers) { ExpectNearDense(16, 0.07); }

}  // namespace
}  // namespace sketchfuse
