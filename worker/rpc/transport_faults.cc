#include "worker/rpc/transport_faults.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace sketchfuse {
namespace {

absl::StatusOr<double> Probability(absl::string_view key, absl::string_view text) {
  double p = 0;
  if (!absl::SimpleAtod(text, &p) || !(p >= 0 && p <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("fault '", key, "': '", text, "' is not a probability in [0, 1]"));
  }
  return p;
}

}  // namespace

absl::StatusOr<TransportFaults> ParseTransportFaults(absl::string_view spec) {
  TransportFaults faults;
  if (spec.empty()) return faults;
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    const std::vector<absl::string_view> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
    if (kv.size() != 2 || kv[0].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("fault spec part '", part, "' is not key=value"));
    }
    const absl::string_view key = kv[0], value = kv[1];
    if (key == "fail_before_send" || key == "drop_reply") {
      absl::StatusOr<double> p = Probability(key, value);
      if (!p.ok()) return p.status();
      (key == "fail_before_send" ? faults.fail_before_send : faults.drop_reply) = *p;
    } else if (key == "delay") {
      const std::vector<absl::string_view> pd = absl::StrSplit(value, absl::MaxSplits(':', 1));
      if (pd.size() != 2) {
        return absl::InvalidArgumentError(absl::StrCat("fault 'delay': '", value, "' is not P:DURATION (e.g. 0.1:20ms)"));
      }
      absl::StatusOr<double> p = Probability(key, pd[0]);
      if (!p.ok()) return p.status();
      absl::Duration d;
      if (!absl::ParseDuration(pd[1], &d) || d < absl::ZeroDuration() || d > absl::Minutes(1)) {
        return absl::InvalidArgumentError(
            absl::StrCat("fault 'delay': '", pd[1], "' is not a duration in [0, 1m] (e.g. 20ms)"));
      }
      faults.delay = *p;
      faults.delay_time = d;
    } else if (key == "seed") {
      if (!absl::SimpleAtoi(value, &faults.seed)) {
        return absl::InvalidArgumentError(absl::StrCat("fault 'seed': '", value, "' is not an unsigned integer"));
      }
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown fault '", key, "'; the faults are fail_before_send, drop_reply, delay and seed"));
    }
  }
  if (faults.fail_before_send + faults.drop_reply + faults.delay > 1) {
    return absl::InvalidArgumentError("the fault probabilities add up to more than 1");
  }
  return faults;
}

FaultDice::Fault FaultDice::Draw() {
  if (!faults_.any()) return Fault::kNone;
  double u;
  {
    std::lock_guard<std::mutex> lock(mu_);
    u = std::uniform_real_distribution<double>(0, 1)(rng_);
  }
  if (u < faults_.fail_before_send) return Fault::kFailBeforeSend;
  u -= faults_.fail_before_send;
  if (u < faults_.drop_reply) return Fault::kDropReply;
  u -= faults_.drop_reply;
  if (u < faults_.delay) return Fault::kDelay;
  return Fault::kNone;
}

}  // namespace sketchfuse
