#include "tools/compression_report.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/compressor_registry.h"
#include "common/cost_model.h"
#include "common/fusion_planner.h"
#include "common/model_profiles.h"
#include "common/status_macros.h"
#include "common/synthetic_gradient.h"
#include "common/topk.h"

namespace sketchfuse {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The spec with `density` added when it sets neither density nor k.
absl::StatusOr<std::string> WithDefaultDensity(const std::string& text, double density) {
  ASSIGN_OR_RETURN(CompressorSpec spec, ParseCompressorSpec(text));
  if (spec.name != "dense" && !spec.params.count("density") && !spec.params.count("k")) {
    spec.params["density"] = absl::StrCat(density);
  }
  return spec.ToString();
}

// Encode and decode times and payload bytes of `compressor` on prefixes of
// the gradient of a few sizes, fitted to linear costs.
struct ProbeFits {
  LinearCost encode;
  LinearCost decode;
  LinearCost bytes;
};

absl::StatusOr<ProbeFits> ProbeCompressor(Compressor& compressor, absl::Span<const float> grad,
                                          absl::Span<const float> params) {
  std::vector<double> sizes, encode_s, decode_s, bytes;
  for (size_t n : {size_t{1} << 12, size_t{1} << 15, size_t{1} << 18, size_t{1} << 20}) {
    n = std::min(n, grad.size());
    double best_encode = INFINITY, best_decode = INFINITY, payload_bytes = 0;
    for (int rep = 0; rep < 3; ++rep) {
      const EncodeContext context{0, params.subspan(0, n)};
      Clock::time_point start = Clock::now();
      ASSIGN_OR_RETURN(Payload payload, compressor.Encode(grad.subspan(0, n), context));
      best_encode = std::min(best_encode, SecondsSince(start));
      start = Clock::now();
      ASSIGN_OR_RETURN(Update update, compressor.Decode(payload));
      best_decode = std::min(best_decode, SecondsSince(start));
      payload_bytes = static_cast<double>(payload.WireBytes());
      (void)update;
    }
    sizes.push_back(static_cast<double>(n));
    encode_s.push_back(best_encode);
    decode_s.push_back(best_decode);
    bytes.push_back(payload_bytes);
  }
  ProbeFits fits;
  ASSIGN_OR_RETURN(LinearFit encode, FitLinearCost(sizes, encode_s));
  ASSIGN_OR_RETURN(LinearFit decode, FitLinearCost(sizes, decode_s));
  ASSIGN_OR_RETURN(LinearFit payload, FitLinearCost(sizes, bytes));
  // A fitted intercept can dip below zero; time never does.
  fits.encode = {std::max(0.0, encode.cost.alpha), encode.cost.beta};
  fits.decode = {std::max(0.0, decode.cost.alpha), decode.cost.beta};
  fits.bytes = {std::max(0.0, payload.cost.alpha), payload.cost.beta};
  return fits;
}

double SquaredMass(absl::Span<const float> grad, const std::vector<uint64_t>& indices) {
  double mass = 0;
  for (uint64_t i : indices) mass += static_cast<double>(grad[i]) * grad[i];
  return mass;
}

}  // namespace

absl::Status ValidateReportOptions(const ReportOptions& o) {
  if (o.compressors.empty()) return absl::InvalidArgumentError("no compressors given");
  if (!(o.density > 0 && o.density <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("density must be in (0, 1]; got ", o.density));
  }
  if (!(o.link_gbps > 0 && std::isfinite(o.link_gbps))) {
    return absl::InvalidArgumentError(absl::StrCat("link_gbps must be > 0; got ", o.link_gbps));
  }
  if (!(o.link_latency_us >= 0 && std::isfinite(o.link_latency_us))) {
    return absl::InvalidArgumentError(
        absl::StrCat("link_latency_us must be >= 0; got ", o.link_latency_us));
  }
  if (!(o.backward_ns_per_element >= 0 && std::isfinite(o.backward_ns_per_element)) ||
      !(o.backward_overhead_us >= 0 && std::isfinite(o.backward_overhead_us))) {
    return absl::InvalidArgumentError("backward time model must be non-negative and finite");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ReportRow>> RunCompressionReport(const ReportOptions& options,
                                                            std::ostream* log) {
  RETURN_IF_ERROR(ValidateReportOptions(options));
  ASSIGN_OR_RETURN(ModelProfile model, ModelProfileByName(options.model));
  std::vector<std::string> specs;
  for (const std::string& text : options.compressors) {
    ASSIGN_OR_RETURN(std::string spec, WithDefaultDensity(text, options.density));
    // Refuse bad specs before any work.
    RETURN_IF_ERROR(CompressorRegistry::Default().Create(spec).status());
    specs.push_back(spec);
  }
  if (log) *log << "model " << model.name << ": " << model.tensors.size() << " tensors, "
                << model.TotalElements() << " parameters\n";

  const std::vector<float> grad = SyntheticGradient(model, options.seed);
  const std::vector<float> params = SyntheticGradient(model, options.seed + 7919);
  const std::vector<LayerTiming> layers =
      SyntheticLayerTimings(model, options.backward_ns_per_element * 1e-9,
                            options.backward_overhead_us * 1e-6);
  double total_mass = 0;
  for (float v : grad) total_mass += static_cast<double>(v) * v;
  const double bytes_per_second = options.link_gbps * 1e9 / 8;

  std::vector<ReportRow> rows;
  for (const std::string& spec : specs) {
    ASSIGN_OR_RETURN(std::unique_ptr<Compressor> compressor,
                     CompressorRegistry::Default().Create(spec));
    ReportRow row;
    row.spec = compressor->spec();

    ASSIGN_OR_RETURN(ProbeFits fits, ProbeCompressor(*compressor, grad, params));
    GroupCostModel cost;
    cost.compress = fits.encode;
    cost.decode = fits.decode;
    cost.transfer = {options.link_latency_us * 1e-6 + fits.bytes.alpha / bytes_per_second,
                     fits.bytes.beta / bytes_per_second};
    ASSIGN_OR_RETURN(FusionPlan plan, PlanByMode(options.fusion, layers, cost));
    row.groups = static_cast<int>(plan.groups.size());
    row.step_ms = 1e3 * SimulateStepTime(layers, plan, cost);
    row.per_layer_step_ms = 1e3 * SimulateStepTime(layers, PlanPerLayer(layers), cost);

    std::vector<uint64_t> selected;
    uint64_t offset = 0;
    for (const FusionGroup& group : plan.groups) {
      const size_t n = static_cast<size_t>(group.num_elements);
      const absl::Span<const float> g = absl::MakeConstSpan(grad).subspan(offset, n);
      const EncodeContext context{0, absl::MakeConstSpan(params).subspan(offset, n)};
      Clock::time_point start = Clock::now();
      ASSIGN_OR_RETURN(Payload payload, compressor->Encode(g, context));
      row.encode_ms += 1e3 * SecondsSince(start);
      start = Clock::now();
      ASSIGN_OR_RETURN(Update update, compressor->Decode(payload));
      row.decode_ms += 1e3 * SecondsSince(start);
      row.payload_bytes += static_cast<double>(payload.WireBytes());
      if (update.dense) {
        for (uint64_t i = 0; i < n; ++i) selected.push_back(offset + i);
      } else {
        for (uint32_t i : update.indices) selected.push_back(offset + i);
      }
      offset += n;
    }
    row.selected = selected.size();
    row.ratio = 4.0 * grad.size() / std::max(1.0, row.payload_bytes);
    const double mass = SquaredMass(grad, selected);
    std::vector<uint64_t> best;
    for (uint32_t i : TopKIndices(grad, selected.size())) best.push_back(i);
    row.mass_share = mass / total_mass;
    row.vs_topk = mass / std::max(SquaredMass(grad, best), 1e-300);
    if (log) *log << "  " << row.spec << ": " << row.groups << " groups, encode "
                  << absl::StrFormat("%.1f", row.encode_ms) << " ms\n";
    rows.push_back(row);
  }
  return rows;
}

std::string FormatReportTable(const std::vector<ReportRow>& rows) {
  std::string out = absl::StrFormat(
      "%-52s %6s %10s %9s %8s %8s %10s %10s %10s %12s\n", "compressor", "groups", "selected",
      "ratio", "L2 mass", "vs top-k", "encode ms", "decode ms", "step ms", "per-layer ms");
  for (const ReportRow& r : rows) {
    absl::StrAppend(&out, absl::StrFormat(
                              "%-52s %6d %10d %8.1fx %7.1f%% %7.1f%% %10.1f %10.1f %10.2f %12.2f\n",
                              r.spec, r.groups, r.selected, r.ratio, 100 * r.mass_share,
                              100 * r.vs_topk, r.encode_ms, r.decode_ms, r.step_ms,
                              r.per_layer_step_ms));
  }
  return out;
}

std::string ReportCsv(const std::vector<ReportRow>& rows) {
  std::string out =
      "compressor,groups,selected,payload_bytes,ratio,mass_share,vs_topk,encode_ms,decode_ms,"
      "step_ms,per_layer_step_ms\n";
  for (const ReportRow& r : rows) {
    absl::StrAppend(&out, absl::StrFormat("\"%s\",%d,%d,%.0f,%.4f,%.6f,%.6f,%.3f,%.3f,%.4f,%.4f\n",
                                          r.spec, r.groups, r.selected, r.payload_bytes, r.ratio,
                                          r.mass_share, r.vs_topk, r.encode_ms, r.decode_ms,
                                          r.step_ms, r.per_layer_step_ms));
  }
  return out;
}

std::string ReportJson(const ReportOptions& o, const std::vector<ReportRow>& rows) {
  std::vector<std::string> items;
  for (const ReportRow& r : rows) {
    items.push_back(absl::StrFormat(
        "{\"compressor\": \"%s\", \"groups\": %d, \"selected\": %d, \"payload_bytes\": %.0f, "
        "\"ratio\": %.4f, \"mass_share\": %.6f, \"vs_topk\": %.6f, \"encode_ms\": %.3f, "
        "\"decode_ms\": %.3f, \"step_ms\": %.4f, \"per_layer_step_ms\": %.4f}",
        r.spec, r.groups, r.selected, r.payload_bytes, r.ratio, r.mass_share, r.vs_topk,
        r.encode_ms, r.decode_ms, r.step_ms, r.per_layer_step_ms));
  }
  return absl::StrFormat(
      "{\"options\": {\"model\": \"%s\", \"density\": %g, \"fusion\": \"%s\", \"link_gbps\": %g, "
      "\"link_latency_us\": %g, \"backward_ns_per_element\": %g, \"backward_overhead_us\": %g, "
      "\"seed\": %d},\n \"rows\": [\n  %s\n ]}\n",
      o.model, o.density, o.fusion, o.link_gbps, o.link_latency_us, o.backward_ns_per_element,
      o.backward_overhead_us, o.seed, absl::StrJoin(items, ",\n  "));
}

}  // namespace sketchfuse
