#include "worker/core/divergence.h"

#include <cmath>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/payload.h"

namespace sketchfuse {
namespace {

constexpr char kPayloadUrl[] = "type.sketchfuse/divergence";

// A field of the encoded record: letters, digits, '-', '_', '.' only, so
// that ';' and '=' stay separators (worker ids are such names).
bool IsPlainField(absl::string_view text) {
  for (char c : text) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                       c == '_' || c == '.';
    if (!plain) return false;
  }
  return true;
}

}  // namespace

std::string Divergence::Describe() const {
  const std::string who = worker.empty() ? "diverged" : absl::StrCat(worker, " diverged");
  if (what == "loss") {
    return absl::StrCat(who, " at step ", step, ": the loss is ", value,
                        std::isfinite(value) ? absl::StrCat(", past ", kBlownUpLossFactor,
                                                            " times a uniform guess's (the model has blown up)")
                                             : "");
  }
  const char* of = what == "gradient"  ? "fused gradient"
                   : what == "update"  ? "aggregated update"
                   : what == "payload" ? "encoded payload"
                                       : what.c_str();
  return absl::StrCat(who, " at step ", step, ": group ", group, "'s ", of, " holds a non-finite value (element ",
                      index, " = ", value, ")");
}

bool Divergence::operator==(const Divergence& o) const {
  const bool same_value = value == o.value || (std::isnan(value) && std::isnan(o.value));
  return step == o.step && group == o.group && worker == o.worker && what == o.what && index == o.index &&
         same_value;
}

std::string EncodeDivergence(const Divergence& d) {
  return absl::StrCat("step=", d.step, ";group=", d.group, ";index=", d.index, ";what=", d.what,
                      ";worker=", d.worker, ";value=", d.value);
}

std::optional<Divergence> DecodeDivergence(absl::string_view text) {
  Divergence d;
  int fields = 0;
  for (absl::string_view field : absl::StrSplit(text, ';')) {
    const std::vector<absl::string_view> kv = absl::StrSplit(field, absl::MaxSplits('=', 1));
    if (kv.size() != 2) return std::nullopt;
    const absl::string_view key = kv[0], value = kv[1];
    bool ok = true;
    if (key == "step") {
      ok = absl::SimpleAtoi(value, &d.step) && d.step >= 0;
    } else if (key == "group") {
      ok = absl::SimpleAtoi(value, &d.group) && d.group >= -1;
    } else if (key == "index") {
      ok = absl::SimpleAtoi(value, &d.index) && d.index >= -1;
    } else if (key == "what") {
      ok = (value == "loss" || value == "gradient" || value == "payload" || value == "update");
      d.what = std::string(value);
    } else if (key == "worker") {
      ok = IsPlainField(value);
      d.worker = std::string(value);
    } else if (key == "value") {
      ok = absl::SimpleAtod(value, &d.value);
    } else {
      ok = false;
    }
    if (!ok) return std::nullopt;
    ++fields;
  }
  if (fields != 6) return std::nullopt;
  return d;
}

absl::Status DivergenceError(const Divergence& divergence) {
  absl::Status status(absl::StatusCode::kDataLoss, divergence.Describe());
  status.SetPayload(kPayloadUrl, absl::Cord(EncodeDivergence(divergence)));
  return status;
}

std::optional<Divergence> DivergenceOf(const absl::Status& status) {
  if (status.ok()) return std::nullopt;
  const auto payload = status.GetPayload(kPayloadUrl);  // absl::optional<absl::Cord>
  if (!payload.has_value()) return std::nullopt;
  return DecodeDivergence(std::string(*payload));
}

double BlownUpLoss(int64_t num_classes) {
  return kBlownUpLossFactor * std::log(static_cast<double>(num_classes));
}

absl::Status CheckLoss(int64_t step, double loss, int64_t num_classes) {
  if (std::isfinite(loss) && loss <= BlownUpLoss(num_classes)) return absl::OkStatus();
  Divergence d;
  d.step = step;
  d.what = "loss";
  d.value = loss;
  return DivergenceError(d);
}

absl::Status CheckFiniteValues(absl::string_view what, int64_t step, int group, absl::Span<const float> values) {
  const std::optional<size_t> bad = FirstNonFinite(values);
  if (!bad.has_value()) return absl::OkStatus();
  Divergence d;
  d.step = step;
  d.group = group;
  d.what = std::string(what);
  d.index = static_cast<int64_t>(*bad);
  d.value = values[*bad];
  return DivergenceError(d);
}

std::optional<Divergence> DivergenceBehind(const absl::Status& error,
                                           const std::function<std::optional<Divergence>()>& posted,
                                           const std::string& worker) {
  std::optional<Divergence> d = DivergenceOf(error);
  if (!d.has_value() && !error.ok() && posted) d = posted();
  if (d.has_value() && d->worker.empty()) d->worker = worker;
  return d;
}

}  // namespace sketchfuse
