// sketchfuse_compression_report: compresses a real model profile's gradient
// with each compressor and prints what it costs and what it keeps.
//
//   bazel run //tools:sketchfuse_compression_report -- --model=resnet50
//
// See tools/compression_report.h for what is measured.
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/compressor_registry.h"
#include "daemon/memory_tuning.h"
#include "common/model_profiles.h"
#include "common/sketch_kernels.h"
#include "tools/compression_report.h"

ABSL_FLAG(std::string, model, "resnet50",
          "Model profile whose layer sizes shape the gradient: resnet50, vgg16, bert_base, "
          "gpt2_small.");
ABSL_FLAG(std::string, compressors, "dense;topk;randomk;threshold;importance;count_sketch",
          "Compressor specs separated by ';', each 'name' or 'name:key=value,...' "
          "(e.g. 'count_sketch:rows=5,width=10'). Names: count_sketch, dense, importance, "
          "randomk, threshold, topk.");
ABSL_FLAG(double, density, 0.001,
          "Fraction of coordinates each selecting compressor keeps, for specs that set neither "
          "density nor k. In (0, 1].");
ABSL_FLAG(std::string, fusion, "optimal",
          "How layers are fused into groups: optimal (dynamic programming over the fitted cost "
          "model), omgs (OMGS-SGD greedy), mergecomp (MergeComp's two-group search, timed on the model), "
          "per_layer, single, or a number N of equal groups.");
ABSL_FLAG(double, link_gbps, 10.0, "Link bandwidth assumed by the step-time model, Gb/s.");
ABSL_FLAG(double, link_latency_us, 50.0, "Per-message latency of the step-time model, us.");
ABSL_FLAG(double, backward_ns_per_element, 0.5,
          "Backward-pass time per gradient element of the compute-device model, ns.");
ABSL_FLAG(double, backward_overhead_us, 20.0, "Backward-pass time per layer (fixed part), us.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the synthetic gradient and parameters.");
ABSL_FLAG(std::string, csv, "", "Also write the table as CSV to this file.");
ABSL_FLAG(std::string, json, "", "Also write the table and options as JSON to this file.");

namespace {

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) {
    std::cerr << "error: cannot write " << path << "\n";
    return false;
  }
  std::cout << "wrote " << path << "\n";
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  // The workers' allocator settings: encode and decode are timed as a worker runs them.
  sketchfuse::KeepFreedMemoryMapped();
  absl::SetProgramUsageMessage(
      "Compresses a model profile's (synthetic, heavy-tailed) gradient with each compressor,\n"
      "fused by the chosen planner, and prints compression ratio, the share of the gradient's\n"
      "L2 mass that the decoded coordinates keep (also relative to the exact top-k of as many\n"
      "coordinates), encode and decode time on this CPU, and the simulated step time.\n"
      "Usage: sketchfuse_compression_report [--model=resnet50] [--compressors=...]");
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() > 1) {
    std::cerr << "error: unexpected argument '" << positional[1] << "' (see --help)\n";
    return 2;
  }
  sketchfuse::ReportOptions options;
  options.model = absl::GetFlag(FLAGS_model);
  options.compressors = absl::StrSplit(absl::GetFlag(FLAGS_compressors), ';', absl::SkipEmpty());
  options.density = absl::GetFlag(FLAGS_density);
  options.fusion = absl::GetFlag(FLAGS_fusion);
  options.link_gbps = absl::GetFlag(FLAGS_link_gbps);
  options.link_latency_us = absl::GetFlag(FLAGS_link_latency_us);
  options.backward_ns_per_element = absl::GetFlag(FLAGS_backward_ns_per_element);
  options.backward_overhead_us = absl::GetFlag(FLAGS_backward_overhead_us);
  options.seed = absl::GetFlag(FLAGS_seed);

  std::cout << "SketchFuse compression report (CPU, one thread; AVX2 kernels "
            << (sketchfuse::sketch_kernels::SimdEnabled() ? "on" : "off") << ")\n";
  absl::StatusOr<std::vector<sketchfuse::ReportRow>> rows =
      sketchfuse::RunCompressionReport(options, &std::cout);
  if (!rows.ok()) {
    std::cerr << "error: " << rows.status().message() << "\n";
    return 2;
  }
  std::cout << "\n" << sketchfuse::FormatReportTable(*rows);
  std::cout << "\nL2 mass: share of the gradient's squared L2 norm on the decoded coordinates; "
               "vs top-k: relative to the exact top-k of as many coordinates.\n"
               "step ms: simulated step (backward + compress on this CPU, transfer at "
            << options.link_gbps << " Gb/s) with --fusion=" << options.fusion
            << "; per-layer ms: the same with one group per layer.\n";
  bool ok = true;
  if (!absl::GetFlag(FLAGS_csv).empty()) ok &= WriteFile(absl::GetFlag(FLAGS_csv), sketchfuse::ReportCsv(*rows));
  if (!absl::GetFlag(FLAGS_json).empty()) {
    ok &= WriteFile(absl::GetFlag(FLAGS_json), sketchfuse::ReportJson(options, *rows));
  }
  return ok ? 0 : 1;
}
