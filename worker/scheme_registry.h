// Every aggregation scheme a worker can run, in one table: its route, the
// compressor it needs, its default compressor spec and a one-line summary
// (for --help and for refusals). Selected by --scheme.
#ifndef SKETCHFUSE_WORKER_SCHEME_REGISTRY_H_
#define SKETCHFUSE_WORKER_SCHEME_REGISTRY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sketchfuse {

enum class Route {
  kCentralized,    // through the aggregation servers (worker/ps_scheme.h)
  kDecentralized,  // through the workers' collectives (worker/collective_scheme.h)
  kHybrid,         // centralized while the servers answer (worker/hybrid_scheme.h)
};

struct SchemeInfo {
  std::string name;
  Route route;
  // Name of the compressor the scheme runs (the registry's).
  std::string compressor;
  std::string default_compressor_spec;
  std::string summary;
};

// The schemes, centralized first.
const std::vector<SchemeInfo>& Schemes();

// The scheme called `name`; INVALID_ARGUMENT listing the schemes otherwise.
absl::StatusOr<SchemeInfo> FindScheme(const std::string& name);

// INVALID_ARGUMENT when `scheme` is unknown or `compressor` is not a valid
// spec of the compressor the scheme needs.
absl::Status CheckSchemeCompressor(const std::string& scheme, const std::string& compressor);

// The scheme's route; kCentralized for an unknown name (check first).
Route SchemeRoute(const std::string& scheme);

// Coordinates a selecting compressor spec keeps of a group of `dim`
// elements (its k, or its density times dim; density 0.001 when neither is
// given). INVALID_ARGUMENT for a spec that does not parse.
absl::StatusOr<uint64_t> SpecSelectionSize(const std::string& spec, uint64_t dim);

// "name: summary" lines for --help.
std::string SchemesHelp();

// True for count_sketch method=fetchsgd: momentum and error live in sketch
// space with the sum (common/fetchsgd_state.h), and workers keep neither (no
// error feedback, no velocity): they sketch their raw gradients.
bool KeepsSketchSpaceState(const std::string& compressor_spec);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_SCHEME_REGISTRY_H_
