// Microbenchmarks of the CPU compression core on a ResNet-50-sized gradient
// (25,557,032 floats): Count-Sketch insert, estimate + heavy-hitter top-k,
// the peeling decode, exact top-k, sketch merge, and memcpy of the same
// bytes as the yardstick.
//
// Run: bazel run -c opt //bench:compression_bench -- --benchmark_out=out.json
// bench/cpu_vs_torch.sh runs it beside the PyTorch reference in one go.
// Single-threaded, like the reference, with the daemons' allocator settings
// (KeepFreedMemoryMapped). Figures: docs/BENCHMARKS.md.
// Extra flags (before Google Benchmark's own): --sf_dim=N (vector length,
// default the ResNet-50 parameter count) and --sf_cols=N (sketch columns,
// default 500,000).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/count_sketch.h"
#include "daemon/memory_tuning.h"
#include "common/model_profiles.h"
#include "common/sketch_hash.h"
#include "common/sketch_peeling.h"
#include "common/topk.h"

namespace sketchfuse {
namespace {

constexpr uint32_t kRows = 5;
uint32_t kCols = 500000;  // FetchSGD's default width; --sf_cols
size_t dim_override = 0;  // --sf_dim

size_t Dim() {
  return dim_override > 0 ? dim_override
                          : static_cast<size_t>(ResNet50Profile().TotalElements());
}

// A heavy-tailed gradient (Student-t, 3 degrees of freedom), fixed seed.
const std::vector<float>& Gradient() {
  static const std::vector<float>* grad = [] {
    auto* g = new std::vector<float>(Dim());
    std::mt19937 rng(42);
    std::student_t_distribution<float> t(3.0f);
    for (float& v : *g) v = t(rng);
    return g;
  }();
  return *grad;
}

void SetBytes(benchmark::State& state, double bytes_per_iteration) {
  state.SetBytesProcessed(static_cast<int64_t>(bytes_per_iteration * state.iterations()));
}

void BM_SketchInsert(benchmark::State& state) {
  const std::vector<float>& g = Gradient();
  CountSketch sketch = *CountSketch::Create({kRows, kCols, 1});
  for (auto _ : state) {
    sketch.Clear();
    benchmark::DoNotOptimize(sketch.Insert(g));
  }
  SetBytes(state, g.size() * sizeof(float));
}
BENCHMARK(BM_SketchInsert)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SketchEstimateTopK(benchmark::State& state) {
  const std::vector<float>& g = Gradient();
  CountSketch sketch = *CountSketch::Create({kRows, kCols, 1});
  (void)sketch.Insert(g);
  const uint64_t k = g.size() / 1000;
  for (auto _ : state) {
    SparseEntries hh = sketch.view().HeavyHitters(g.size(), k);
    benchmark::DoNotOptimize(hh.indices.data());
  }
  SetBytes(state, g.size() * sizeof(float));
}
BENCHMARK(BM_SketchEstimateTopK)->Unit(benchmark::kMillisecond)->UseRealTime();

// The peeling decode of count_sketch method=peel at its default load: 4
// workers' top-k (k = d/160 each, the 10x default) summed in a 4-row sketch
// of d/10 cells, decoded back.
void BM_PeelDecode(benchmark::State& state) {
  const std::vector<float>& g = Gradient();
  const uint64_t k = std::max<uint64_t>(1, g.size() / 160);
  const uint32_t cols = static_cast<uint32_t>(std::max<uint64_t>(1, 4 * k));
  CountSketch sketch = *CountSketch::Create({4, cols, StepSeed(1, 0)});
  std::mt19937 rng(7);
  for (int w = 0; w < 4; ++w) {
    std::vector<uint32_t> indices;
    for (uint64_t j = 0; j < k; ++j) indices.push_back(rng() % g.size());
    std::sort(indices.begin(), indices.end());
    indices.erase(std::unique(indices.begin(), indices.end()), indices.end());
    std::vector<float> values;
    for (uint32_t i : indices) values.push_back(g[i]);
    (void)sketch.InsertEntries(indices, values);
  }
  size_t decoded = 0;
  for (auto _ : state) {
    SparseEntries got = PeelDecode(sketch.view(), g.size());
    decoded = got.indices.size();
    benchmark::DoNotOptimize(got.indices.data());
  }
  state.counters["decoded"] = static_cast<double>(decoded);
  SetBytes(state, g.size() * sizeof(float));
}
BENCHMARK(BM_PeelDecode)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_TopK(benchmark::State& state) {
  const std::vector<float>& g = Gradient();
  const uint64_t k = g.size() / 1000;
  for (auto _ : state) {
    std::vector<uint32_t> idx = TopKIndices(g, k);
    benchmark::DoNotOptimize(idx.data());
  }
  SetBytes(state, g.size() * sizeof(float));
}
BENCHMARK(BM_TopK)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SketchMerge(benchmark::State& state) {
  CountSketch a = *CountSketch::Create({kRows, kCols, 1});
  CountSketch b = *CountSketch::Create({kRows, kCols, 1});
  (void)b.Insert(Gradient());
  for (auto _ : state) {
    benchmark::DoNotOptimize(a.Merge(b));
  }
  // Bytes moved: read both tables, write one.
  SetBytes(state, 3.0 * kRows * kCols * sizeof(float));
}
BENCHMARK(BM_SketchMerge)->Unit(benchmark::kMicrosecond)->UseRealTime();

// memcpy of one sketch table: the bandwidth the merge is compared with.
void BM_MemcpySketchTable(benchmark::State& state) {
  std::vector<float> src(kRows * kCols, 1.0f), dst(kRows * kCols);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), src.size() * sizeof(float));
    benchmark::ClobberMemory();
  }
  // Bytes moved: read one, write one.
  SetBytes(state, 2.0 * src.size() * sizeof(float));
}
BENCHMARK(BM_MemcpySketchTable)->Unit(benchmark::kMicrosecond)->UseRealTime();

// memcpy of the whole gradient (the figure PyTorch's reference also prints).
void BM_MemcpyGradient(benchmark::State& state) {
  const std::vector<float>& g = Gradient();
  std::vector<float> dst(g.size());
  for (auto _ : state) {
    std::memcpy(dst.data(), g.data(), g.size() * sizeof(float));
    benchmark::ClobberMemory();
  }
  SetBytes(state, 2.0 * g.size() * sizeof(float));
}
BENCHMARK(BM_MemcpyGradient)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace sketchfuse

// Takes --sf_dim and --sf_cols out of argv; the rest goes to Google Benchmark.
int main(int argc, char** argv) {
  // The allocator as the workers and servers set it (daemon/memory_tuning.h).
  sketchfuse::KeepFreedMemoryMapped();
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value_of = [&arg](const std::string& flag) -> long long {
      const std::string text = arg.substr(flag.size());
      char* end = nullptr;
      const long long v = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0' || v <= 0 || v > 0xFFFFFFFFll) {
        std::fprintf(stderr, "error: %s needs a positive integer below 2^32, got '%s'\n",
                     flag.c_str(), text.c_str());
        std::exit(2);
      }
      return v;
    };
    if (arg.rfind("--sf_dim=", 0) == 0) {
      sketchfuse::dim_override = static_cast<size_t>(value_of("--sf_dim="));
    } else if (arg.rfind("--sf_cols=", 0) == 0) {
      sketchfuse::kCols = static_cast<uint32_t>(value_of("--sf_cols="));
    } else {
      rest.push_back(argv[i]);
    }
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  if (benchmark::ReportUnrecognizedArguments(rest_argc, rest.data())) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
