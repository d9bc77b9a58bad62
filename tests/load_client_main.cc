// sketchfuse_load: drives a real sketchfuse_server with many workers × groups
// at once and reports rounds/s, push latency (p50, p99, max), the server's
// resident memory over the run, and whether every answer was right. A long
// run is the soak: `--steps=2500 --groups=4` is 10,000 rounds.
//
//   bazel run //tests:load_client -- --server=$PWD/bazel-bin/server/sketchfuse_server \
//       --workers=8 --groups=4 --steps=2500 --csv=out/load.csv --json=out/load.json
//
// Writes the memory samples as CSV, the summary as JSON, and (with gnuplot)
// a plot of resident memory against rounds next to the CSV.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "tests/load_run.h"

ABSL_FLAG(std::string, server, "", "Path of the sketchfuse_server binary (required).");
ABSL_FLAG(std::string, dir, "/tmp", "Scratch directory (the job config, the server's output).");
ABSL_FLAG(int, workers, 8, "Workers, each with its own connection.");
ABSL_FLAG(int, groups, 4, "Groups per step (one thread per worker and group).");
ABSL_FLAG(uint64_t, dim, 100000, "Elements per group.");
ABSL_FLAG(std::string, compressor, "count_sketch:method=estimate,k=100,rows=3,seed=7", "The groups' compressor.");
ABSL_FLAG(uint64_t, steps, 1000, "Steps (rounds per group).");
ABSL_FLAG(std::string, csv, "", "Write the memory samples here (rounds,rss_kib).");
ABSL_FLAG(std::string, json, "", "Write the summary here.");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Load and soak of a real sketchfuse_server (see the file comment).");
  const std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    std::cerr << "sketchfuse_load: unexpected argument '" << rest[1] << "'" << std::endl;
    return 2;
  }
  if (absl::GetFlag(FLAGS_server).empty()) {
    std::cerr << "sketchfuse_load: --server is required" << std::endl;
    return 2;
  }
  sketchfuse::LoadConfig config;
  config.server_binary = absl::GetFlag(FLAGS_server);
  config.dir = absl::GetFlag(FLAGS_dir);
  config.workers = absl::GetFlag(FLAGS_workers);
  config.groups = absl::GetFlag(FLAGS_groups);
  config.dim = absl::GetFlag(FLAGS_dim);
  config.compressor = absl::GetFlag(FLAGS_compressor);
  config.steps = absl::GetFlag(FLAGS_steps);
  absl::StatusOr<sketchfuse::LoadReport> report = sketchfuse::RunLoad(config);
  if (!report.ok()) {
    std::cerr << "sketchfuse_load: " << report.status().message() << std::endl;
    return 1;
  }
  const uint64_t rss_first = report->rss_kib.front().second, rss_last = report->rss_kib.back().second;
  uint64_t rss_peak = 0;
  for (const auto& [rounds, kib] : report->rss_kib) rss_peak = std::max(rss_peak, kib);
  std::printf("%d workers x %d groups x %llu steps of %s (dim %llu): %llu rounds in %.1f s, %.0f rounds/s\n",
              config.workers, config.groups, static_cast<unsigned long long>(config.steps), config.compressor.c_str(),
              static_cast<unsigned long long>(config.dim), static_cast<unsigned long long>(report->rounds),
              report->seconds, report->rounds_per_second);
  std::printf("push latency: p50 %.2f ms, p99 %.2f ms, max %.2f ms; %.1f MB pushed\n", report->p50_ms,
              report->p99_ms, report->max_ms, report->bytes_pushed / 1e6);
  std::printf("server resident memory: %.1f MiB after 10%% of the run, %.1f MiB at the end, peak %.1f MiB\n",
              rss_first / 1024.0, rss_last / 1024.0, rss_peak / 1024.0);
  std::printf("failed pushes: %llu; wrong answers: %llu\n", static_cast<unsigned long long>(report->failed_pushes),
              static_cast<unsigned long long>(report->wrong_updates));
  if (const std::string path = absl::GetFlag(FLAGS_csv); !path.empty()) {
    std::ofstream out(path);
    out << "rounds,rss_kib\n";
    for (const auto& [rounds, kib] : report->rss_kib) out << rounds << ',' << kib << '\n';
    out.close();
    const std::string png = path.substr(0, path.rfind('.')) + ".png";
    const std::string plot = absl::StrCat(
        "command -v gnuplot >/dev/null && gnuplot -e \"set terminal pngcairo size 800,400 noenhanced; set output '",
        png, "'; set datafile separator ','; set key off; set xlabel 'rounds completed (all groups)';",
        " set ylabel 'server RSS (MiB)'; set yrange [0:*]; plot '", path, "' using 1:(\\$2/1024) every ::1 with linespoints\"");
    if (std::system(plot.c_str()) == 0) std::printf("plot: %s\n", png.c_str());
  }
  if (const std::string path = absl::GetFlag(FLAGS_json); !path.empty()) {
    std::ofstream(path) << absl::StrCat(
        "{\"workers\": ", config.workers, ", \"groups\": ", config.groups, ", \"steps\": ", config.steps,
        ", \"dim\": ", config.dim, ", \"compressor\": \"", config.compressor, "\", \"rounds\": ", report->rounds,
        ", \"seconds\": ", report->seconds, ", \"rounds_per_second\": ", report->rounds_per_second,
        ", \"p50_ms\": ", report->p50_ms, ", \"p99_ms\": ", report->p99_ms, ", \"max_ms\": ", report->max_ms,
        ", \"rss_kib_first\": ", rss_first, ", \"rss_kib_last\": ", rss_last, ", \"rss_kib_peak\": ", rss_peak,
        ", \"failed_pushes\": ", report->failed_pushes, ", \"wrong_updates\": ", report->wrong_updates, "}\n");
  }
  return report->failed_pushes == 0 && report->wrong_updates == 0 ? 0 : 1;
}
