// GPU compression benchmark: SketchFuse's kernels on ResNet-50 and GPT-2 sized
// gradients (the parameter counts of common/model_profiles), with the device's
// copy bandwidth measured in the same run as the yardstick.
//
// Operations (k = d/1000, sketch rows x (d/51) columns, as FetchSGD sizes it):
//   copy               cudaMemcpyAsync device to device (bytes read + written)
//   sketch_insert      zero the table, insert the gradient (_r1: one-row sketch)
//   heavy_hitters      estimate every coordinate (median over rows) + top-k (_r1 too)
//   compress_decode    the two above: the whole sketch round of one worker
//   compress_decode_r1 the same with a one-row sketch
//   peel_compress      the sketch schemes' default route (count_sketch
//                      method=peel): top-k of the gradient (k_peel =
//                      --peel_density of it), zero the table (--peel_rows x
//                      --peel_width * k_peel), insert the k_peel entries
//   peel_decode        the peeling decode of four such workers' summed
//                      sketches (four gradients), as after an allreduce
//   peel_round         the two: one worker's whole sketch round at 10x
//   peel_decode_cpu    the same decode by the host's PeelDecode, one core,
//                      on the same table (the reference the kernels match)
//   topk               exact top-k of the gradient by magnitude
//   topk_cub_sort      the same by CUB's radix sort of all n keys (CUDA 13.0's
//                      CUB has no DeviceTopK), checked to select the same k
//   gather, scatter_add    k (index, value) pairs
//   ef_momentum        u = m u + g; e += u
//   pack               the model's layers into one fused buffer
//   ceiling_reductions n * rows float atomics into the table, in runs of
//                      consecutive cells at hashed starts (the chunked hash
//                      family's pattern): the hardware bound of sketch_insert
//   ceiling_loads      n * rows loads in the same pattern: the bound of the
//                      estimate inside heavy_hitters
//   ceiling_*_scattered the same at one hashed cell per operation (the
//                      pattern of a scattered bucket hash, as FetchSGD's)
// Each is warmed up, then timed `--reps` times with CUDA events; the median
// and the minimum are reported, with the effective bandwidth counted from the
// fewest bytes the operation must move. Figures go to stdout and, as JSON, to
// --json; bench/gpu_torch_reference.py times the same work in PyTorch and
// bench/compare_gpu_vs_torch.py sets the two side by side.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/gpu_ceilings.h"
#include "bench/gpu_sort_topk.h"
#include "common/count_sketch.h"
#include "common/model_profiles.h"
#include "common/sketch_hash.h"
#include "cuda/count_sketch_kernels.h"
#include "cuda/cuda_check.h"
#include "cuda/device.h"
#include "cuda/device_buffer.h"
#include "cuda/error_feedback_kernels.h"
#include "cuda/fusion_kernels.h"
#include "cuda/peel_kernels.h"
#include "common/sketch_peeling.h"
#include "cuda/sparse_kernels.h"
#include "cuda/topk_kernels.h"

ABSL_FLAG(std::string, profiles, "resnet50,gpt2_small", "model profiles whose sizes are benchmarked");
ABSL_FLAG(int, rows, 5, "sketch rows");
ABSL_FLAG(double, cols_divisor, 51.0, "sketch columns = parameters / this");
ABSL_FLAG(double, k_fraction, 0.001, "k = parameters * this");
ABSL_FLAG(int, reps, 30, "timed repetitions per operation");
ABSL_FLAG(double, peel_density, 0.00625, "peel route: k = parameters * this per worker");
ABSL_FLAG(int, peel_rows, 4, "peel route: sketch rows");
ABSL_FLAG(double, peel_width, 4.0, "peel route: sketch columns = k * this");
ABSL_FLAG(std::string, json, "", "write the figures here as JSON");

namespace sketchfuse {
namespace {

#define BENCH_CHECK(expr)                                                      \
  do {                                                                         \
    const absl::Status sf_status_ = (expr);                                    \
    if (!sf_status_.ok()) {                                                    \
      std::fprintf(stderr, "error: %s: %s\n", #expr, sf_status_.ToString().c_str()); \
      std::exit(1);                                                            \
    }                                                                          \
  } while (false)

#define GPU_CHECK_ASYNC(call)                                                          \
  do {                                                                                 \
    const cudaError_t sf_error_ = (call);                                              \
    if (sf_error_ != cudaSuccess) {                                                    \
      std::fprintf(stderr, "error: %s: %s\n", #call, cudaGetErrorString(sf_error_)); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (false)

absl::Status CudaCopy(float* to, const float* from, uint64_t n, cudaStream_t stream) {
  GPU_RETURN_IF_ERROR(cudaMemcpyAsync(to, from, n * sizeof(float), cudaMemcpyDeviceToDevice, stream),
                      "copying on the device");
  return absl::OkStatus();
}

template <typename T>
T Unwrap(absl::StatusOr<T> value, const char* what) {
  if (!value.ok()) {
    std::fprintf(stderr, "error: %s: %s\n", what, value.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(value);
}

struct Result {
  std::string profile;
  std::string op;
  uint64_t n;
  double median_ms;
  double min_ms;
  double bytes;
};

// A heavy-tailed synthetic gradient: Student-t with 3 degrees of freedom, made
// on all host cores (one generator per chunk, so it is deterministic).
std::vector<float> StudentTGradient(uint64_t n, uint32_t seed) {
  std::vector<float> x(n);
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  const uint64_t chunk = (n + threads - 1) / threads;
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937 rng(seed * 7919u + t);
      std::student_t_distribution<float> dist(3.0f);
      for (uint64_t i = t * chunk; i < std::min(n, (t + 1) * chunk); ++i) x[i] = dist(rng) * 1e-3f;
    });
  }
  for (std::thread& w : workers) w.join();
  return x;
}

class Timer {
 public:
  explicit Timer(cudaStream_t stream) : stream_(stream) {
    cudaEventCreate(&start_);
    cudaEventCreate(&stop_);
  }
  ~Timer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }

  // Median and minimum milliseconds of `reps` runs of `work` after 3 warm-ups.
  std::pair<double, double> Time(const std::function<void()>& work, int reps) {
    for (int i = 0; i < 3; ++i) work();
    std::vector<double> ms;
    for (int i = 0; i < reps; ++i) {
      cudaEventRecord(start_, stream_);
      work();
      cudaEventRecord(stop_, stream_);
      cudaEventSynchronize(stop_);
      float elapsed = 0;
      cudaEventElapsedTime(&elapsed, start_, stop_);
      ms.push_back(elapsed);
    }
    const cudaError_t error = cudaGetLastError();
    if (error != cudaSuccess) {
      std::fprintf(stderr, "error: CUDA: %s\n", cudaGetErrorString(error));
      std::exit(1);
    }
    std::sort(ms.begin(), ms.end());
    return {ms[ms.size() / 2], ms.front()};
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t start_;
  cudaEvent_t stop_;
};

void RunProfile(const ModelProfile& profile, cudaStream_t stream, std::vector<Result>* results) {
  const uint64_t n = profile.TotalElements();
  const int reps = absl::GetFlag(FLAGS_reps);
  const SketchShape shape{static_cast<uint32_t>(absl::GetFlag(FLAGS_rows)),
                          static_cast<uint32_t>(n / absl::GetFlag(FLAGS_cols_divisor)), 42};
  const SketchShape one_row{1, shape.cols, 42};
  const uint64_t k = std::max<uint64_t>(1, n * absl::GetFlag(FLAGS_k_fraction));
  std::printf("\n%s: %llu parameters, sketch %u x %u, k = %llu\n", profile.name.c_str(),
              static_cast<unsigned long long>(n), shape.rows, shape.cols,
              static_cast<unsigned long long>(k));

  const std::vector<float> host = StudentTGradient(n, 1);
  auto x = Unwrap(DeviceBuffer<float>::FromHost(host), "gradient");
  auto y = Unwrap(DeviceBuffer<float>::Allocate(n), "copy target");
  auto table = Unwrap(DeviceBuffer<float>::Allocate(shape.num_cells()), "sketch");
  auto workspace = Unwrap(TopKWorkspace::Create(n, true), "top-k workspace");
  auto indices = Unwrap(DeviceBuffer<uint32_t>::Allocate(k), "indices");
  auto values = Unwrap(DeviceBuffer<float>::Allocate(k), "values");
  auto velocity = Unwrap(DeviceBuffer<float>::FromHost(StudentTGradient(n, 2)), "velocity");
  auto residual = Unwrap(DeviceBuffer<float>::FromHost(StudentTGradient(n, 3)), "residual");

  // The layers as separate allocations, packed into y.
  std::vector<DeviceBuffer<float>> layers;
  std::vector<LayerSlice> slices;
  for (const TensorSpec& t : profile.BackwardOrder()) {
    layers.push_back(Unwrap(DeviceBuffer<float>::Allocate(t.num_elements), "layer"));
    BENCH_CHECK(layers.back().ZeroAsync(stream));
    slices.push_back({layers.back().data(), static_cast<uint64_t>(t.num_elements)});
  }
  auto layout = Unwrap(FusionLayout::Create(slices), "fusion layout");

  Timer timer(stream);
  auto record = [&](const std::string& op, double bytes, const std::function<void()>& work) {
    const auto [median, minimum] = timer.Time(work, reps);
    results->push_back({profile.name, op, n, median, minimum, bytes});
    std::printf("  %-20s %10.3f ms (min %8.3f)  %8.1f GB/s\n", op.c_str(), median, minimum,
                bytes / (median * 1e-3) / 1e9);
  };
  const double vec = 4.0 * n;
  auto insert = [&](const SketchShape& s) {
    BENCH_CHECK(table.ZeroAsync(stream));
    BENCH_CHECK(LaunchCountSketchInsert(s, x.data(), n, table.data(), stream));
  };
  auto decode = [&](const SketchShape& s) {
    BENCH_CHECK(LaunchSketchHeavyHitters(s, table.data(), n, k, workspace, indices.data(),
                                         values.data(), stream));
  };

  record("copy", 2 * vec, [&] {
    BENCH_CHECK(CudaCopy(y.data(), x.data(), n, stream));
  });
  record("sketch_insert", vec, [&] { insert(shape); });
  record("sketch_insert_r1", vec, [&] { insert(one_row); });
  insert(one_row);
  record("heavy_hitters_r1", vec, [&] { decode(one_row); });
  insert(shape);
  record("heavy_hitters", vec, [&] { decode(shape); });
  record("compress_decode", vec, [&] {
    insert(shape);
    decode(shape);
  });
  record("compress_decode_r1", vec, [&] {
    insert(one_row);
    decode(one_row);
  });
  record("topk", vec, [&] {
    BENCH_CHECK(LaunchTopK(x.data(), n, k, workspace, indices.data(), values.data(), stream));
  });
  {
    // The same selection by CUB's radix sort of every key (CUDA 13.0's CUB
    // has no DeviceTopK), and whether it selected the same coordinates.
    auto sort_topk = Unwrap(SortTopK::Create(n), "sort top-k");
    auto sorted_indices = Unwrap(DeviceBuffer<uint32_t>::Allocate(k), "sorted top-k indices");
    record("topk_cub_sort", vec, [&] { BENCH_CHECK(sort_topk.Run(x.data(), n, k, sorted_indices.data(), stream)); });
    BENCH_CHECK(LaunchTopK(x.data(), n, k, workspace, indices.data(), values.data(), stream));
    GPU_CHECK_ASYNC(cudaStreamSynchronize(stream));
    std::vector<uint32_t> ours = Unwrap(indices.ToHost(), "top-k indices");
    std::vector<uint32_t> by_sort = Unwrap(sorted_indices.ToHost(), "sorted top-k indices");
    std::sort(by_sort.begin(), by_sort.end());
    std::printf("  topk_cub_sort selected %s coordinates as topk\n", by_sort == ours ? "the same" : "OTHER");
  }
  record("gather", 12.0 * k, [&] {
    BENCH_CHECK(LaunchGather(x.data(), n, indices.data(), k, values.data(), nullptr, stream));
  });
  record("scatter_add", 16.0 * k, [&] {
    BENCH_CHECK(LaunchScatterAdd(indices.data(), values.data(), k, y.data(), n, nullptr, stream));
  });
  record("ef_momentum", 5 * vec, [&] {
    BENCH_CHECK(LaunchErrorFeedbackAccumulate(x.data(), n, 0.9f, velocity.data(),
                                              residual.data(), stream));
  });
  record("pack", 2 * vec, [&] { BENCH_CHECK(layout.Pack(y.data(), stream)); });
  // Ceilings: the reductions of an insert (n * rows of them into the table)
  // and the loads of an estimate, with no other work, in the runs of
  // consecutive cells of the chunked hash family, and fully scattered (one
  // random cell per coordinate, the pattern of a scattered bucket hash such
  // as FetchSGD's). Their bytes are 4 per operation.
  const uint64_t ops = n * shape.rows;
  const uint32_t run = 1u << ChunkShift(shape.cols);
  // The peel route at its default setting: each of four workers sketches its
  // own top-k; the decode peels their sum.
  {
    const uint64_t k_peel = std::max<uint64_t>(1, n * absl::GetFlag(FLAGS_peel_density));
    const SketchShape peel_shape{static_cast<uint32_t>(absl::GetFlag(FLAGS_peel_rows)),
                                 static_cast<uint32_t>(std::max<double>(1, k_peel * absl::GetFlag(FLAGS_peel_width))),
                                 StepSeed(42, 0)};
    auto peel_table = Unwrap(DeviceBuffer<float>::Allocate(peel_shape.num_cells()), "peel sketch");
    auto sum_table = Unwrap(DeviceBuffer<float>::Allocate(peel_shape.num_cells()), "summed peel sketch");
    auto selected = Unwrap(DeviceBuffer<uint32_t>::Allocate(k_peel), "peel indices");
    auto selected_values = Unwrap(DeviceBuffer<float>::Allocate(k_peel), "peel values");
    auto topk_workspace = Unwrap(TopKWorkspace::Create(n, false), "top-k workspace");
    auto compress = [&](const float* grad, float* into, bool zero) {
      BENCH_CHECK(LaunchTopK(grad, n, k_peel, topk_workspace, selected.data(), selected_values.data(), stream));
      if (zero) {
        GPU_CHECK_ASYNC(cudaMemsetAsync(into, 0, peel_shape.num_cells() * sizeof(float), stream));
      }
      BENCH_CHECK(LaunchCountSketchInsertEntries(peel_shape, selected.data(), selected_values.data(), k_peel, into,
                                                 stream));
    };
    // Four workers' gradients: four independent heavy-tailed vectors.
    GPU_CHECK_ASYNC(cudaMemsetAsync(sum_table.data(), 0, peel_shape.num_cells() * sizeof(float), stream));
    for (uint32_t worker = 0; worker < 4; ++worker) {
      auto grad = Unwrap(DeviceBuffer<float>::FromHost(StudentTGradient(n, 11 + worker)), "a worker's gradient");
      compress(grad.data(), sum_table.data(), false);
      GPU_CHECK_ASYNC(cudaStreamSynchronize(stream));  // before `grad` is freed
    }
    PeelWorkspace peel_workspace;
    DevicePeelResult peeled;
    auto decode_sum = [&] {
      PeelOptions options;
      options.max_entries = peel_shape.num_cells();
      peeled = Unwrap(PeelDecodeOnDevice(peel_shape, sum_table.data(), n, options, peel_workspace, stream),
                      "peel decode");
    };
    std::printf("  peel: sketch %u x %u (%.1fx), k = %llu per worker, 4 workers\n", peel_shape.rows,
                peel_shape.cols, 4.0 * n / (4.0 * peel_shape.num_cells()), static_cast<unsigned long long>(k_peel));
    record("peel_compress", vec, [&] { compress(x.data(), peel_table.data(), true); });
    record("peel_decode", 4.0 * peel_shape.num_cells(), decode_sum);
    std::printf("  peel_decode: %llu of %llu inserted coordinates recovered in %u passes "
                "(%llu ordered subtractions)\n",
                static_cast<unsigned long long>(peeled.count), static_cast<unsigned long long>(4 * k_peel),
                peeled.passes, static_cast<unsigned long long>(peeled.ordered_subtractions));
    record("peel_round", vec, [&] {
      compress(x.data(), peel_table.data(), true);
      decode_sum();
    });
    // The host decoder on the same table: the reference the kernels match.
    const std::vector<float> host_table = Unwrap(sum_table.ToHost(), "summed peel sketch");
    PeelOptions options;
    options.max_entries = peel_shape.num_cells();
    std::vector<double> cpu_ms;
    SparseEntries cpu;
    for (int rep = 0; rep < std::min(reps, 5); ++rep) {
      const auto start = std::chrono::steady_clock::now();
      cpu = PeelDecode(SketchView(peel_shape, host_table.data()), n, options);
      cpu_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(cpu_ms.begin(), cpu_ms.end());
    results->push_back({profile.name, "peel_decode_cpu", n, cpu_ms[cpu_ms.size() / 2], cpu_ms.front(),
                        4.0 * peel_shape.num_cells()});
    std::printf("  %-20s %10.3f ms (min %8.3f)  host, one core; %s the device's result\n", "peel_decode_cpu",
                cpu_ms[cpu_ms.size() / 2], cpu_ms.front(),
                cpu.indices.size() == peeled.count ? "as many coordinates as" : "NOT the size of");
  }
  record("ceiling_reductions", 4.0 * ops, [&] {
    BENCH_CHECK(LaunchHashedReductions(table.data(), shape.num_cells(), ops, run, stream));
  });
  record("ceiling_loads", 4.0 * ops, [&] {
    BENCH_CHECK(LaunchHashedLoads(table.data(), shape.num_cells(), ops, run, y.data(), stream));
  });
  record("ceiling_reductions_scattered", 4.0 * ops, [&] {
    BENCH_CHECK(LaunchHashedReductions(table.data(), shape.num_cells(), ops, 1, stream));
  });
  record("ceiling_loads_scattered", 4.0 * ops, [&] {
    BENCH_CHECK(LaunchHashedLoads(table.data(), shape.num_cells(), ops, 1, y.data(), stream));
  });
}

void WriteJson(const std::string& path, const std::string& device,
               const std::vector<Result>& results, const std::vector<ModelProfile>& profiles) {
  std::ofstream out(path);
  out << "{\n  \"device\": \"" << device << "\",\n  \"rows\": " << absl::GetFlag(FLAGS_rows)
      << ",\n  \"cols_divisor\": " << absl::GetFlag(FLAGS_cols_divisor)
      << ",\n  \"k_fraction\": " << absl::GetFlag(FLAGS_k_fraction)
      << ",\n  \"reps\": " << absl::GetFlag(FLAGS_reps) << ",\n  \"layer_sizes\": {";
  for (size_t p = 0; p < profiles.size(); ++p) {
    std::vector<int64_t> sizes;
    for (const TensorSpec& t : profiles[p].BackwardOrder()) sizes.push_back(t.num_elements);
    out << (p ? ", " : "") << "\"" << profiles[p].name << "\": [" << absl::StrJoin(sizes, ", ")
        << "]";
  }
  out << "},\n  \"results\": [\n";
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    out << "    {\"profile\": \"" << r.profile << "\", \"op\": \"" << r.op << "\", \"n\": " << r.n
        << ", \"median_ms\": " << r.median_ms << ", \"min_ms\": " << r.min_ms
        << ", \"bytes\": " << r.bytes << ", \"gbps\": " << r.bytes / (r.median_ms * 1e-3) / 1e9
        << "}" << (i + 1 < results.size() ? ",\n" : "\n");
  }
  out << "  ]\n}\n";
  if (!out) {
    std::fprintf(stderr, "error: cannot write %s\n", path.c_str());
    std::exit(1);
  }
}

}  // namespace
}  // namespace sketchfuse

int main(int argc, char** argv) {
  using namespace sketchfuse;
  absl::SetProgramUsageMessage("gpu_compression_bench [--profiles=resnet50,gpt2_small] [--json=F]");
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_rows) < 1 || absl::GetFlag(FLAGS_rows) > 64 ||
      absl::GetFlag(FLAGS_reps) < 1 || !(absl::GetFlag(FLAGS_cols_divisor) >= 1) ||
      !(absl::GetFlag(FLAGS_k_fraction) > 0 && absl::GetFlag(FLAGS_k_fraction) <= 1)) {
    std::fprintf(stderr,
                 "error: need 1 <= --rows <= 64, --reps >= 1, --cols_divisor >= 1 and "
                 "0 < --k_fraction <= 1\n");
    return 2;
  }
  std::vector<ModelProfile> profiles;
  for (absl::string_view name : absl::StrSplit(absl::GetFlag(FLAGS_profiles), ',')) {
    absl::StatusOr<ModelProfile> profile = ModelProfileByName(name);
    if (!profile.ok()) {
      std::fprintf(stderr, "error: --profiles: %s\n", profile.status().ToString().c_str());
      return 2;
    }
    profiles.push_back(*std::move(profile));
  }
  const GpuAvailability gpus = ProbeGpus();
  if (gpus.device_count == 0) {
    std::fprintf(stderr, "gpu_compression_bench: no GPU (%s); nothing measured\n",
                 gpus.reason.c_str());
    return 2;
  }
  std::printf("device: %s\n", gpus.first_device.c_str());
  cudaStream_t stream;
  if (cudaStreamCreate(&stream) != cudaSuccess) {
    std::fprintf(stderr, "error: cannot create a CUDA stream\n");
    return 1;
  }
  std::vector<Result> results;
  for (const ModelProfile& profile : profiles) RunProfile(profile, stream, &results);
  if (!absl::GetFlag(FLAGS_json).empty()) {
    WriteJson(absl::GetFlag(FLAGS_json), gpus.first_device, results, profiles);
  }
  return 0;
}
