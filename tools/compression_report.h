// The compression report: what each compressor does to a real model's
// gradient, end to end on this machine.
//
// For a model profile (common/model_profiles.h) it builds the synthetic
// gradient (common/synthetic_gradient.h), and for every compressor:
//   1. fits a cost model from short probes (encode and decode time measured
//      here; transfer from payload bytes over a link of given bandwidth and
//      latency),
//   2. fuses the layers with the chosen planner (common/fusion_planner.h),
//   3. compresses and decodes every fused group, timing both,
//   4. compares the decoded coordinates with the exact top-k of the whole
//      gradient at the same number of coordinates (share of L2 mass).
#ifndef SKETCHFUSE_TOOLS_COMPRESSION_REPORT_H_
#define SKETCHFUSE_TOOLS_COMPRESSION_REPORT_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sketchfuse {

struct ReportOptions {
  std::string model = "resnet50";
  // Compressor specs; a spec without density or k gets `density`.
  std::vector<std::string> compressors = {"dense",     "topk",       "randomk",
                                          "threshold", "importance", "count_sketch"};
  double density = 0.001;
  // --fusion mode of PlanByMode: optimal, omgs, per_layer, single or N.
  std::string fusion = "optimal";
  double link_gbps = 10.0;
  double link_latency_us = 50.0;
  // Backward-pass model of the compute device, per layer:
  // overhead + elements * ns_per_element.
  double backward_ns_per_element = 0.5;
  double backward_overhead_us = 20.0;
  uint64_t seed = 1;
};

// INVALID_ARGUMENT naming the first bad option.
absl::Status ValidateReportOptions(const ReportOptions& options);

struct ReportRow {
  std::string spec;          // canonical spec of the compressor
  int groups = 0;            // fused groups in the plan
  uint64_t selected = 0;     // coordinates in the decoded update
  double payload_bytes = 0;  // all groups, one worker
  double ratio = 0;          // dense bytes / payload bytes
  double mass_share = 0;     // L2 mass of the decoded coordinates / all of it
  double vs_topk = 0;        // ... / mass of the exact top-k at the same count
  double encode_ms = 0;      // all groups, this CPU, one thread
  double decode_ms = 0;
  double step_ms = 0;            // simulated step time with the chosen fusion
  double per_layer_step_ms = 0;  // ... with one group per layer
};

// Runs the report. Progress lines go to `log` (may be null).
absl::StatusOr<std::vector<ReportRow>> RunCompressionReport(const ReportOptions& options,
                                                            std::ostream* log);

// A fixed-width table, one row per compressor.
std::string FormatReportTable(const std::vector<ReportRow>& rows);
// CSV with a header line.
std::string ReportCsv(const std::vector<ReportRow>& rows);
// A JSON object {"options": {...}, "rows": [...]}.
std::string ReportJson(const ReportOptions& options, const std::vector<ReportRow>& rows);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_TOOLS_COMPRESSION_REPORT_H_
