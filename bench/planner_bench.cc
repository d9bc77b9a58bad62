// How long the fusion planners take on models of 50 to 400 layers with
// random sizes and costs (the optimal planner's target: 200 layers < 50 ms),
// and on the real profiles' layer lists.
//
// Run: bazel run -c opt //bench:planner_bench
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/cost_model.h"
#include "common/fusion_planner.h"
#include "common/model_profiles.h"
#include "common/synthetic_gradient.h"

namespace sketchfuse {
namespace {

// Layers with log-uniform sizes (10 to 10M elements) and a GPU-like backward
// model; costs of a sketch compressor over a 10 Gb/s link.
std::vector<LayerTiming> RandomLayers(int count) {
  std::mt19937 rng(count);
  std::uniform_real_distribution<double> log_size(1, 7);
  std::vector<LayerTiming> layers;
  for (int i = 0; i < count; ++i) {
    const int64_t n = static_cast<int64_t>(std::pow(10.0, log_size(rng)));
    layers.push_back({n, 20e-6 + n * 0.5e-9});
  }
  return layers;
}

GroupCostModel SketchCosts() {
  GroupCostModel model;
  model.compress = {30e-6, 2e-9};
  model.transfer = {50e-6, 4.0 * 0.05 / 1.25e9};
  model.decode = {20e-6, 3e-9};
  return model;
}

void BM_PlanOptimal(benchmark::State& state) {
  const std::vector<LayerTiming> layers = RandomLayers(static_cast<int>(state.range(0)));
  const GroupCostModel model = SketchCosts();
  for (auto _ : state) benchmark::DoNotOptimize(PlanOptimal(layers, model));
}
BENCHMARK(BM_PlanOptimal)->Arg(50)->Arg(100)->Arg(200)->Arg(400)->Unit(benchmark::kMillisecond);

void BM_PlanOmgsGreedy(benchmark::State& state) {
  const std::vector<LayerTiming> layers = RandomLayers(static_cast<int>(state.range(0)));
  const GroupCostModel model = SketchCosts();
  for (auto _ : state) benchmark::DoNotOptimize(PlanOmgsGreedy(layers, model));
}
BENCHMARK(BM_PlanOmgsGreedy)->Arg(200)->Unit(benchmark::kMillisecond);

void BM_PlanOptimalProfile(benchmark::State& state) {
  const ModelProfile profile = *ModelProfileByName(ModelProfileNames()[state.range(0)]);
  const std::vector<LayerTiming> layers = SyntheticLayerTimings(profile, 0.5e-9, 20e-6);
  const GroupCostModel model = SketchCosts();
  for (auto _ : state) benchmark::DoNotOptimize(PlanOptimal(layers, model));
  state.SetLabel(profile.name);
}
BENCHMARK(BM_PlanOptimalProfile)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sketchfuse

BENCHMARK_MAIN();
