#include "common/compressor_params.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace sketchfuse {

std::string CompressorSpec::ToString() const {
  if (params.empty()) return name;
  std::vector<std::string> items;
  for (const auto& [key, value] : params) items.push_back(absl::StrCat(key, "=", value));
  return absl::StrCat(name, ":", absl::StrJoin(items, ","));
}

absl::StatusOr<CompressorSpec> ParseCompressorSpec(absl::string_view text) {
  CompressorSpec spec;
  const size_t colon = text.find(':');
  spec.name = std::string(text.substr(0, colon));
  if (spec.name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("compressor spec '", text, "' has no name (expected name:key=value,...)"));
  }
  if (colon == absl::string_view::npos) return spec;
  for (absl::string_view item : absl::StrSplit(text.substr(colon + 1), ',')) {
    const size_t eq = item.find('=');
    if (eq == absl::string_view::npos || eq == 0 || eq + 1 == item.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "compressor spec '", text, "': parameter '", item, "' is not key=value"));
    }
    std::string key(item.substr(0, eq));
    if (!spec.params.emplace(key, std::string(item.substr(eq + 1))).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("compressor spec '", text, "': parameter '", key, "' is repeated"));
    }
  }
  return spec;
}

bool ParamReader::Has(absl::string_view key) {
  known_.insert(std::string(key));
  return spec_.params.count(std::string(key)) > 0;
}

absl::StatusOr<std::string> ParamReader::Text(absl::string_view key) {
  if (!Has(key)) return absl::InvalidArgumentError(absl::StrCat(spec_.name, ": parameter ", key, " is missing"));
  return spec_.params.at(std::string(key));
}

absl::StatusOr<double> ParamReader::Double(absl::string_view key, double fallback, double min,
                                           double max) {
  if (!Has(key)) return fallback;
  const std::string& text = spec_.params.at(std::string(key));
  double value;
  if (!absl::SimpleAtod(text, &value) || !std::isfinite(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec_.name, ": parameter ", key, "='", text, "' is not a number"));
  }
  if (value < min || value > max) {
    return absl::InvalidArgumentError(absl::StrCat(spec_.name, ": parameter ", key, "=", text,
                                                   " is outside [", min, ", ", max, "]"));
  }
  return value;
}

absl::StatusOr<uint64_t> ParamReader::Uint(absl::string_view key, uint64_t fallback,
                                           uint64_t min, uint64_t max) {
  if (!Has(key)) return fallback;
  const std::string& text = spec_.params.at(std::string(key));
  uint64_t value;
  if (!absl::SimpleAtoi(text, &value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        spec_.name, ": parameter ", key, "='", text, "' is not a non-negative integer"));
  }
  if (value < min || value > max) {
    return absl::InvalidArgumentError(absl::StrCat(spec_.name, ": parameter ", key, "=", text,
                                                   " is outside [", min, ", ", max, "]"));
  }
  return value;
}

absl::StatusOr<std::string> ParamReader::Choice(absl::string_view key, absl::string_view fallback,
                                                const std::vector<std::string>& choices) {
  if (!Has(key)) return std::string(fallback);
  const std::string& text = spec_.params.at(std::string(key));
  if (std::find(choices.begin(), choices.end(), text) == choices.end()) {
    return absl::InvalidArgumentError(absl::StrCat(spec_.name, ": parameter ", key, "='", text,
                                                   "' is not one of ", absl::StrJoin(choices, ", ")));
  }
  return text;
}

absl::Status ParamReader::Finish() const {
  for (const auto& [key, value] : spec_.params) {
    if (known_.count(key) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(spec_.name, ": unknown parameter '", key, "' (accepted: ",
                       known_.empty() ? "none" : absl::StrJoin(known_, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace sketchfuse
