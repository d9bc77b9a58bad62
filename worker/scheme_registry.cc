#include "worker/scheme_registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "common/compressor_registry.h"

namespace sketchfuse {

const std::vector<SchemeInfo>& Schemes() {
  static const std::vector<SchemeInfo>* schemes = new std::vector<SchemeInfo>{
      {"sketch_ps", Route::kCentralized, "count_sketch", "count_sketch:method=peel,density=0.00625,rows=4,width=4",
       "Count-Sketch per fused group, summed on the servers, which decode the global top-k (Sketch-Fusion)"},
      {"topk_ps", Route::kCentralized, "topk", "topk:density=0.01",
       "local top-k, unioned and re-selected on the servers (BytePS-style baseline)"},
      {"dense_ps", Route::kCentralized, "dense", "dense", "dense gradients summed on the servers"},
      {"dense_allreduce", Route::kDecentralized, "dense", "dense",
       "dense ring allreduce among the workers (the uncompressed baseline)"},
      {"dense_bf16_allreduce", Route::kDecentralized, "dense", "dense",
       "dense ring allreduce with bfloat16 values on the wire, summed in float32 (the 16-bit baseline, 2x)"},
      {"sketch_allreduce", Route::kDecentralized, "count_sketch", "count_sketch:method=peel,density=0.0042,rows=4,width=4",
       "allreduce of the sketches; every worker decodes the same top-k (gs-SGD global sketching)"},
      {"topk_allgather", Route::kDecentralized, "topk", "topk:density=0.01",
       "local top-k, allgather of (index, value), summed"},
      // gtopk applies k coordinates in all, where topk_allgather applies the
      // union of P local top-k (3.7k at P = 4 on the Fashion-MNIST models), so
      // it needs twice topk's density to hold accuracy (worker/README.md).
      {"gtopk", Route::kDecentralized, "topk", "topk:density=0.02",
       "gTop-k: log2 P rounds of pairwise merge and top-k re-selection, then a broadcast"},
      // importance_allreduce's density is per rank: every rank names its k
      // most important indices and all allreduce their values at the union
      // (up to P k coordinates; 14x at P = 4 on the Fashion-MNIST models).
      {"importance_allreduce", Route::kDecentralized, "importance", "importance:density=0.01",
       "every rank names its important indices by |g|/|w| (allgather); all allreduce their values at the union"},
      {"spardl", Route::kDecentralized, "topk", "topk:density=0.01",
       "SparDL: Spar-Reduce-Scatter and Spar-All-Gather with global residual collection"},
      {"auto", Route::kHybrid, "count_sketch", "count_sketch:method=peel,density=0.00625,rows=4,width=4",
       "sketch_ps while the servers answer, sketch_allreduce when they fail; back when they are healthy"},
  };
  return *schemes;
}

absl::StatusOr<SchemeInfo> FindScheme(const std::string& name) {
  std::vector<std::string> names;
  for (const SchemeInfo& scheme : Schemes()) {
    if (scheme.name == name) return scheme;
    names.push_back(scheme.name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown scheme '", name, "'; the schemes are ", absl::StrJoin(names, ", ")));
}

absl::Status CheckSchemeCompressor(const std::string& scheme, const std::string& compressor) {
  absl::StatusOr<SchemeInfo> info = FindScheme(scheme);
  if (!info.ok()) return info.status();
  absl::StatusOr<CompressorSpec> spec = ParseCompressorSpec(compressor);
  if (!spec.ok()) return spec.status();
  if (spec->name != info->compressor) {
    return absl::InvalidArgumentError(absl::StrCat("scheme ", scheme, " needs the ", info->compressor,
                                                   " compressor; got '", compressor, "'"));
  }
  // The parameters too (ranges, unknown names).
  absl::StatusOr<std::unique_ptr<Compressor>> made = CompressorRegistry::Default().Create(compressor);
  if (!made.ok()) return made.status();
  return absl::OkStatus();
}

Route SchemeRoute(const std::string& scheme) {
  absl::StatusOr<SchemeInfo> info = FindScheme(scheme);
  return info.ok() ? info->route : Route::kCentralized;
}

absl::StatusOr<uint64_t> SpecSelectionSize(const std::string& spec, uint64_t dim) {
  absl::StatusOr<CompressorSpec> parsed = ParseCompressorSpec(spec);
  if (!parsed.ok()) return parsed.status();
  double density = 0.001;
  uint64_t k = 0;
  if (auto it = parsed->params.find("density"); it != parsed->params.end()) {
    if (!absl::SimpleAtod(it->second, &density)) {
      return absl::InvalidArgumentError(absl::StrCat("density '", it->second, "' of '", spec, "' is not a number"));
    }
  }
  if (auto it = parsed->params.find("k"); it != parsed->params.end()) {
    if (!absl::SimpleAtoi(it->second, &k)) {
      return absl::InvalidArgumentError(absl::StrCat("k '", it->second, "' of '", spec, "' is not a count"));
    }
  }
  return SelectionSize(dim, density, k);
}

std::string SchemesHelp() {
  std::string help;
  for (const SchemeInfo& scheme : Schemes()) absl::StrAppend(&help, "  ", scheme.name, ": ", scheme.summary, "\n");
  return help;
}

bool KeepsSketchSpaceState(const std::string& compressor_spec) {
  absl::StatusOr<CompressorSpec> spec = ParseCompressorSpec(compressor_spec);
  if (!spec.ok() || spec->name != "count_sketch") return false;
  auto method = spec->params.find("method");
  return method != spec->params.end() && method->second == "fetchsgd";
}

}  // namespace sketchfuse
