// A compressor spec ("name" or "name:key=value,key=value") and typed,
// range-checked access to its parameters, for the compressors' factories.
// The registry (compressor_registry.h) parses specs with it and hands each
// factory a ParamReader; the compressors depend on this unit, not on the
// registry.
#ifndef SKETCHFUSE_COMMON_COMPRESSOR_PARAMS_H_
#define SKETCHFUSE_COMMON_COMPRESSOR_PARAMS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sketchfuse {

// A parsed spec: the compressor's name and its raw parameters.
struct CompressorSpec {
  std::string name;
  std::map<std::string, std::string> params;

  // "name:key=value,..." with keys in sorted order.
  std::string ToString() const;
};

// Parses "name" or "name:key=value,key=value". INVALID_ARGUMENT for an empty
// name, an item without '=', an empty key or value, or a repeated key.
absl::StatusOr<CompressorSpec> ParseCompressorSpec(absl::string_view text);

// Typed, range-checked access to a spec's parameters. Each getter records the
// key as known; Finish() refuses keys that no getter asked for.
class ParamReader {
 public:
  explicit ParamReader(const CompressorSpec& spec) : spec_(spec) {}

  // The value of `key` in [min, max], or `fallback` when absent.
  absl::StatusOr<double> Double(absl::string_view key, double fallback, double min, double max);
  absl::StatusOr<uint64_t> Uint(absl::string_view key, uint64_t fallback, uint64_t min,
                                uint64_t max);
  // The value of `key`, one of `choices`, or `fallback` when absent.
  absl::StatusOr<std::string> Choice(absl::string_view key, absl::string_view fallback,
                                     const std::vector<std::string>& choices);
  // True when the spec sets `key` (and records it as known).
  bool Has(absl::string_view key);
  // The raw value of `key` (recorded as known); INVALID_ARGUMENT when the
  // spec does not set it.
  absl::StatusOr<std::string> Text(absl::string_view key);

  // INVALID_ARGUMENT naming the first unknown parameter and the accepted ones.
  absl::Status Finish() const;

  const std::string& name() const { return spec_.name; }

 private:
  const CompressorSpec& spec_;
  std::set<std::string> known_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_COMPRESSOR_PARAMS_H_
