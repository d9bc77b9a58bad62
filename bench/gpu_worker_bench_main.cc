// A worker's step with its groups on the GPU against the same step on the
// host, side by side in one run: synthetic ResNet-50 and GPT-2 profiles,
// --scheme (sketch_allreduce, or fixed_sketch_allreduce: its table, then the
// exact values at its candidates gathered from the residual on the GPU)
// among --workers workers (threads of this process, a real
// Gloo group on loopback), the backward pass modelled as free (0 ns per
// element) so the step is what the worker adds to it: fusion, compression
// (error feedback, momentum, the sketch insert: of the whole group, or for
// method=peel of its top-k), the allreduce of the sketches and the decode
// (heavy hitters of the summed sketch, or its peeling decode).
//
// For each workload and placement it prints the median step time over
// --steps steps (after --warmup) and rank 0's median time per step in each
// phase of the timeline (compress, communicate, decode, summed over the
// groups); writes them to --csv and --json. bench/plot_gpu_worker.py draws
// the plot. Needs a GPU; says so and exits 1 without one (a bad flag exits
// 2 first).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "daemon/memory_tuning.h"
#include "common/model_profiles.h"
#include "worker/collective/local_group.h"
#include "worker/schemes/collective_scheme.h"
#include "worker/schemes/scheme_registry.h"
#include "worker/gpu/device_memory.h"
#include "worker/pipeline/job_plan.h"
#include "worker/training/synthetic_runner.h"

ABSL_FLAG(std::string, workloads, "resnet50,gpt2_small", "synthetic profiles to run, comma-separated");
ABSL_FLAG(int, workers, 2, "workers (threads, one Gloo group on loopback)");
ABSL_FLAG(int, steps, 6, "timed steps per run");
ABSL_FLAG(int, warmup, 2, "untimed steps first");
ABSL_FLAG(std::string, scheme, "sketch_allreduce",
          "a decentralized scheme that runs on the GPU: sketch_allreduce or fixed_sketch_allreduce");
ABSL_FLAG(std::string, compressor, "count_sketch:method=estimate,density=0.001,rows=5,width=10",
          "the groups' compressor (fixed_sketch_allreduce: a method=candidates spec)");
ABSL_FLAG(std::string, fusion, "4", "fusion mode");
ABSL_FLAG(std::string, csv, "", "write the figures here as CSV");
ABSL_FLAG(std::string, json, "", "write the figures here as JSON");

namespace sketchfuse {
namespace {

struct Figures {
  std::string workload, device;
  int64_t parameters = 0;
  double step_ms = 0;
  std::map<std::string, double> phase_ms;  // rank 0, median per step
  double bytes_sent_per_step = 0;
};

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

absl::StatusOr<Figures> RunOnce(const std::string& workload, const std::string& device) {
  absl::StatusOr<ModelProfile> profile = ModelProfileByName(workload);
  if (!profile.ok()) return profile.status();
  const int workers = absl::GetFlag(FLAGS_workers);
  const int steps = absl::GetFlag(FLAGS_warmup) + absl::GetFlag(FLAGS_steps);
  v1::RunConfig run;
  run.set_workload(workload);
  run.set_scheme(absl::GetFlag(FLAGS_scheme));
  run.set_second_round(SecondRoundFor(run.scheme(), false));
  run.set_compressor(absl::GetFlag(FLAGS_compressor));
  run.set_fusion(absl::GetFlag(FLAGS_fusion));
  run.set_error_feedback(true);
  run.set_momentum(0.9);
  run.set_epochs(1);
  run.set_synthetic_steps(steps);
  run.set_backward_ns_per_element(0);
  run.set_device(device);
  if (absl::Status s = DescribeSyntheticRun(&run); !s.ok()) return s;
  const int64_t parameters = profile->TotalElements();
  absl::StatusOr<v1::JobConfig> job = MakeJobConfig("bench", workers, run);
  if (!job.ok()) return job.status();
  std::mutex mu;
  std::vector<double> step_seconds;
  std::map<std::string, std::vector<double>> phases;
  double bytes = 0;
  const std::vector<absl::Status> statuses = RunOnLocalGlooGroup(workers, [&](Collective& collective) -> absl::Status {
    absl::StatusOr<std::unique_ptr<CollectiveScheme>> scheme = CollectiveScheme::Create(*job, &collective);
    if (!scheme.ok()) return scheme.status();
    SyntheticConfig config;
    *config.joined.mutable_job() = *job;
    config.joined.set_rank(collective.rank());
    config.joined.set_world_size(workers);
    const bool reporter = collective.rank() == 0;
    SyntheticRunner* runner_ptr = nullptr;
    config.on_step = [&](const StepReport& report) {
      if (!reporter || report.step < absl::GetFlag(FLAGS_warmup)) return;
      std::map<std::string, double> sums;
      for (const auto& spans : runner_ptr->pipeline().timeline().groups) {
        for (const TraceSpan& span : spans) sums[span.name] += absl::ToDoubleMilliseconds(span.end - span.begin);
      }
      std::lock_guard<std::mutex> lock(mu);
      step_seconds.push_back(report.seconds);
      for (const auto& [name, ms] : sums) phases[name].push_back(ms);
      bytes = static_cast<double>(report.bytes_sent);
    };
    absl::StatusOr<std::unique_ptr<SyntheticRunner>> runner = SyntheticRunner::Create(config, scheme->get());
    if (!runner.ok()) return runner.status();
    runner_ptr = runner->get();
    absl::StatusOr<TrainingSummary> summary = (*runner)->Run(nullptr);
    return summary.status();
  });
  for (const absl::Status& s : statuses) {
    if (!s.ok()) return s;
  }
  Figures f;
  f.workload = workload;
  f.device = device;
  f.parameters = parameters;
  f.step_ms = 1e3 * Median(step_seconds);
  for (const auto& [name, values] : phases) f.phase_ms[name] = Median(values);
  f.bytes_sent_per_step = bytes;
  return f;
}

int Main() {
  const std::string scheme = absl::GetFlag(FLAGS_scheme);
  if (scheme != "sketch_allreduce" && scheme != "fixed_sketch_allreduce") {
    std::fprintf(stderr, "gpu_worker_bench: --scheme must be sketch_allreduce or fixed_sketch_allreduce; got '%s'\n",
                 scheme.c_str());
    return 2;
  }
  if (absl::GetFlag(FLAGS_workers) < 1 || absl::GetFlag(FLAGS_steps) < 1 || absl::GetFlag(FLAGS_warmup) < 0) {
    std::fprintf(stderr, "gpu_worker_bench: --workers and --steps must be >= 1 and --warmup >= 0\n");
    return 2;
  }
  if (absl::Status gpu = CheckGpuWorker(); !gpu.ok()) {
    std::fprintf(stderr, "gpu_worker_bench: %s\n", std::string(gpu.message()).c_str());
    return 1;
  }
  std::vector<Figures> all;
  std::printf("%-11s %-4s %12s %10s %12s %14s %10s %8s\n", "workload", "on", "parameters", "step ms", "compress ms",
              "communicate ms", "decode ms", "speed-up");
  const std::vector<std::string> workloads = absl::StrSplit(absl::GetFlag(FLAGS_workloads), ',', absl::SkipEmpty());
  for (const std::string& workload : workloads) {
    double host_ms = 0;
    for (const std::string device : {"cpu", "gpu"}) {
      absl::StatusOr<Figures> f = RunOnce(workload, device);
      if (!f.ok()) {
        std::fprintf(stderr, "gpu_worker_bench: %s on %s: %s\n", workload.c_str(), device.c_str(),
                     std::string(f.status().message()).c_str());
        return 1;
      }
      if (device == "cpu") host_ms = f->step_ms;
      std::printf("%-11s %-4s %12lld %10.2f %12.2f %14.2f %10.2f %7.1fx\n", workload.c_str(), device.c_str(),
                  static_cast<long long>(f->parameters), f->step_ms, f->phase_ms["compress"],
                  f->phase_ms["communicate"], f->phase_ms["decode"], host_ms / f->step_ms);
      std::fflush(stdout);
      all.push_back(*f);
    }
  }
  if (const std::string path = absl::GetFlag(FLAGS_csv); !path.empty()) {
    std::ofstream out(path);
    out << "workload,device,parameters,workers,step_ms,compress_ms,communicate_ms,decode_ms,bytes_sent_per_step\n";
    for (Figures& f : all) {
      out << f.workload << ',' << f.device << ',' << f.parameters << ',' << absl::GetFlag(FLAGS_workers) << ','
          << f.step_ms << ',' << f.phase_ms["compress"] << ',' << f.phase_ms["communicate"] << ','
          << f.phase_ms["decode"] << ',' << f.bytes_sent_per_step << '\n';
    }
  }
  if (const std::string path = absl::GetFlag(FLAGS_json); !path.empty()) {
    std::vector<std::string> rows;
    for (Figures& f : all) {
      rows.push_back(absl::StrCat("{\"workload\":\"", f.workload, "\",\"scheme\":\"", absl::GetFlag(FLAGS_scheme),
                                  "\",\"device\":\"", f.device,
                                  "\",\"parameters\":", f.parameters, ",\"workers\":", absl::GetFlag(FLAGS_workers),
                                  ",\"step_ms\":", f.step_ms, ",\"compress_ms\":", f.phase_ms["compress"],
                                  ",\"communicate_ms\":", f.phase_ms["communicate"], ",\"decode_ms\":",
                                  f.phase_ms["decode"], ",\"bytes_sent_per_step\":", f.bytes_sent_per_step, "}"));
    }
    std::ofstream(path) << "[\n" << absl::StrJoin(rows, ",\n") << "\n]\n";
  }
  return 0;
}

}  // namespace
}  // namespace sketchfuse

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("A GPU worker's step against a host worker's, side by side (needs a GPU).");
  const std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    std::fprintf(stderr, "gpu_worker_bench: unexpected argument '%s'\n", rest[1]);
    return 2;
  }
  sketchfuse::KeepFreedMemoryMapped();
  return sketchfuse::Main();
}
