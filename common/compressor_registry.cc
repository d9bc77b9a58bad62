#include "common/compressor_registry.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/compressors/builtin.h"

namespace sketchfuse {

namespace {

// The built-in compressors under their names.
void RegisterBuiltins(CompressorRegistry* registry) {
  // Names are distinct, so registration cannot fail.
  (void)registry->Register("dense", "no compression (linear)", MakeDenseCompressor);
  (void)registry->Register("topk", "exact top-k by magnitude; density|k", MakeTopKCompressor);
  (void)registry->Register("randomk",
                           "k coordinates drawn from (seed, step), equal on every worker "
                           "(linear); density|k, seed",
                           MakeRandomKCompressor);
  (void)registry->Register("threshold",
                           "DGC sampled threshold; density|k, sample (fraction), seed",
                           MakeThresholdCompressor);
  (void)registry->Register("importance",
                           "top-k of |g|/(|w|+epsilon), importance-weighted pruning; "
                           "density|k, epsilon",
                           MakeImportanceCompressor);
  (void)registry->Register("count_sketch",
                           "Count-Sketch, decode = heavy hitters (linear); density|k, rows, "
                           "width|cols, seed",
                           MakeCountSketchCompressor);
  (void)registry->Register("powersgd",
                           "PowerSGD: rank-r factors of each matrix by one power iteration with a warm start, two "
                           "rounds of sums (linear); rank, seed, shapes (the job's)",
                           MakePowerSgdCompressor);
}

}  // namespace

const CompressorRegistry& CompressorRegistry::Default() {
  static const CompressorRegistry* registry = [] {
    auto* r = new CompressorRegistry;
    RegisterBuiltins(r);
    return r;
  }();
  return *registry;
}

absl::Status CompressorRegistry::Register(std::string name, std::string description,
                                          Factory factory) {
  if (name.empty()) return absl::InvalidArgumentError("compressor name is empty");
  if (entries_.count(name) > 0) {
    return absl::AlreadyExistsError(absl::StrCat("compressor '", name, "' is already registered"));
  }
  entries_.emplace(std::move(name), Entry{std::move(description), std::move(factory)});
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Compressor>> CompressorRegistry::Create(
    const CompressorSpec& spec) const {
  auto it = entries_.find(spec.name);
  if (it == entries_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown compressor '", spec.name,
                                                   "' (known: ", absl::StrJoin(Names(), ", "),
                                                   ")"));
  }
  ParamReader reader(spec);
  absl::StatusOr<std::unique_ptr<Compressor>> compressor = it->second.factory(reader);
  if (!compressor.ok()) return compressor.status();
  absl::Status unknown = reader.Finish();
  if (!unknown.ok()) return unknown;
  return compressor;
}

absl::StatusOr<std::unique_ptr<Compressor>> CompressorRegistry::Create(
    absl::string_view spec_text) const {
  absl::StatusOr<CompressorSpec> spec = ParseCompressorSpec(spec_text);
  if (!spec.ok()) return spec.status();
  return Create(*spec);
}

std::vector<std::string> CompressorRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, entry] : entries_) names.push_back(name);
  return names;
}

std::string CompressorRegistry::Describe() const {
  std::string out;
  for (const auto& [name, entry] : entries_) {
    absl::StrAppend(&out, name, ": ", entry.description, "\n");
  }
  return out;
}

}  // namespace sketchfuse
