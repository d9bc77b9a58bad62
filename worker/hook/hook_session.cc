#include "worker/hook/hook_session.h"

#include <cmath>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/payload.h"
#include "worker/pipeline/job_plan.h"
#include "worker/schemes/scheme_registry.h"

namespace sketchfuse {
namespace {

absl::Status BadValue(absl::string_view key, absl::string_view value, absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat("setting '", key, "': '", value, "' is not ", expected));
}

absl::StatusOr<bool> ParseBool(absl::string_view key, absl::string_view value) {
  if (value == "1" || value == "true") return true;
  if (value == "0" || value == "false") return false;
  return BadValue(key, value, "0, 1, true or false");
}

// Names of the decentralized schemes, the ones a hook runs.
std::string HookSchemes() {
  std::vector<std::string> names;
  for (const SchemeInfo& scheme : Schemes()) {
    if (scheme.route == Route::kDecentralized) names.push_back(scheme.name);
  }
  return absl::StrJoin(names, ", ");
}

double Seconds(const std::vector<TraceSpan>& spans, absl::string_view name) {
  double total = 0;
  for (const TraceSpan& span : spans) {
    if (span.name == name) total += absl::ToDoubleSeconds(span.end - span.begin);
  }
  return total;
}

}  // namespace

absl::StatusOr<HookSettings> ParseHookSettings(const std::string& text) {
  HookSettings settings;
  bool has_scheme = false, has_world = false, has_rank = false;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("setting line '", line.substr(0, 80), "' has no '='"));
    }
    const absl::string_view key = line.substr(0, eq), value = line.substr(eq + 1);
    if (key == "scheme") {
      settings.scheme = std::string(value);
      has_scheme = true;
    } else if (key == "compressor") {
      settings.compressor = std::string(value);
    } else if (key == "rank") {
      if (!absl::SimpleAtoi(value, &settings.rank) || settings.rank < 0) {
        return BadValue(key, value, "an integer >= 0");
      }
      has_rank = true;
    } else if (key == "world_size") {
      if (!absl::SimpleAtoi(value, &settings.world_size) || settings.world_size < 1) {
        return BadValue(key, value, "an integer >= 1");
      }
      has_world = true;
    } else if (key == "seed") {
      if (!absl::SimpleAtoi(value, &settings.seed)) return BadValue(key, value, "an unsigned 64-bit integer");
    } else if (key == "momentum") {
      if (!absl::SimpleAtod(value, &settings.momentum) || !(settings.momentum >= 0 && settings.momentum < 1)) {
        return BadValue(key, value, "a number in [0, 1)");
      }
    } else if (key == "release_cap") {
      if (!absl::SimpleAtod(value, &settings.release_cap) || !std::isfinite(settings.release_cap) ||
          settings.release_cap < 0) {
        return BadValue(key, value, "a finite number >= 0");
      }
    } else if (key == "error_feedback" || key == "second_round" || key == "check_finite") {
      absl::StatusOr<bool> flag = ParseBool(key, value);
      if (!flag.ok()) return flag.status();
      (key == "error_feedback" ? settings.error_feedback
                               : key == "second_round" ? settings.second_round : settings.check_finite) = *flag;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown setting '", key.substr(0, 80),
          "' (known: scheme, compressor, rank, world_size, seed, momentum, error_feedback, release_cap, "
          "second_round, check_finite)"));
    }
  }
  if (!has_scheme) return absl::InvalidArgumentError("setting 'scheme' is missing");
  if (!has_world) return absl::InvalidArgumentError("setting 'world_size' is missing");
  if (has_rank && settings.rank >= settings.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("setting 'rank': ", settings.rank, " is not below world_size ", settings.world_size));
  }
  absl::StatusOr<SchemeInfo> scheme = FindScheme(settings.scheme);
  if (!scheme.ok()) return absl::InvalidArgumentError(absl::StrCat("setting 'scheme': ", scheme.status().message()));
  if (scheme->route != Route::kDecentralized) {
    return absl::InvalidArgumentError(absl::StrCat("setting 'scheme': '", settings.scheme,
                                                   "' aggregates on the servers; the hook runs the decentralized "
                                                   "schemes over the process group: ",
                                                   HookSchemes()));
  }
  if (settings.compressor.empty()) settings.compressor = scheme->default_compressor_spec;
  if (absl::Status s = CheckSchemeCompressor(settings.scheme, settings.compressor); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("setting 'compressor': ", s.message()));
  }
  if (absl::Status s = CheckRunScheme(HookRun(settings)); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("settings: ", s.message()));
  }
  return settings;
}

std::string HookSettingsText(const HookSettings& s) {
  return absl::StrFormat(
      "scheme=%s\ncompressor=%s\nrank=%d\nworld_size=%d\nseed=%d\nmomentum=%.17g\nerror_feedback=%d\n"
      "release_cap=%.17g\nsecond_round=%d\ncheck_finite=%d\n",
      s.scheme, s.compressor, s.rank, s.world_size, s.seed, s.momentum, s.error_feedback, s.release_cap,
      s.second_round, s.check_finite);
}

v1::RunConfig HookRun(const HookSettings& settings) {
  v1::RunConfig run;
  run.set_workload("hook");
  run.set_scheme(settings.scheme);
  run.set_compressor(settings.compressor);
  run.set_fusion("single");
  run.set_seed(settings.seed);
  run.set_momentum(settings.momentum);
  run.set_error_feedback(settings.error_feedback);
  run.set_release_cap(settings.release_cap);
  run.set_second_round(settings.second_round);
  run.set_device("cpu");
  return run;
}

absl::StatusOr<std::unique_ptr<HookSession>> HookSession::Create(HookSettings settings,
                                                                 std::unique_ptr<Collective> collective) {
  if (collective == nullptr) return absl::InvalidArgumentError("no collective");
  if (collective->size() != settings.world_size || collective->rank() != settings.rank) {
    return absl::InvalidArgumentError(absl::StrCat("the settings say rank ", settings.rank, " of ",
                                                   settings.world_size, "; the process group has rank ",
                                                   collective->rank(), " of ", collective->size()));
  }
  return std::unique_ptr<HookSession>(new HookSession(std::move(settings), std::move(collective)));
}

absl::StatusOr<int> HookSession::AddGroup(uint64_t dim) {
  if (dim == 0 || dim > UINT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("a group has 1 to 2^32 - 1 elements; got ", dim));
  }
  v1::RunConfig run = HookRun(settings_);
  run.add_layer_sizes(dim);
  absl::StatusOr<v1::JobConfig> job = MakeJobConfig("hook", static_cast<uint32_t>(settings_.world_size), run);
  if (!job.ok()) return job.status();
  absl::StatusOr<std::unique_ptr<CollectiveScheme>> scheme = CollectiveScheme::Create(*job, collective_.get());
  if (!scheme.ok()) return scheme.status();
  groups_.push_back(Group{dim, *std::move(scheme)});
  return static_cast<int>(groups_.size()) - 1;
}

absl::Status HookSession::CheckGroup(int group) const {
  if (group < 0 || group >= num_groups()) {
    return absl::InvalidArgumentError(absl::StrCat("group ", group, " does not exist (", num_groups(), " groups)"));
  }
  return absl::OkStatus();
}

absl::Status HookSession::CheckAllFinite(int group, uint64_t step, absl::Span<const float> grad) {
  const absl::Time begin = absl::Now();
  const std::optional<size_t> bad = FirstNonFinite(grad);
  std::vector<float> flags(settings_.world_size, 0.0f);
  if (bad.has_value()) flags[settings_.rank] = 1.0f;
  absl::Status reduced = collective_->AllReduceSum(absl::MakeSpan(flags));
  stats_.check_s += absl::ToDoubleSeconds(absl::Now() - begin);
  if (!reduced.ok()) return reduced;
  std::vector<int> ranks;
  for (int r = 0; r < settings_.world_size; ++r) {
    if (flags[r] != 0.0f) ranks.push_back(r);
  }
  if (ranks.empty()) return absl::OkStatus();
  std::string message = absl::StrCat("diverged: non-finite gradient at step ", step, " in group ", group, " on rank",
                                      ranks.size() > 1 ? "s " : " ", absl::StrJoin(ranks, ", "));
  if (bad.has_value()) absl::StrAppend(&message, " (this rank's first at index ", *bad, ")");
  return absl::FailedPreconditionError(message);
}

absl::Status HookSession::Exchange(int group, uint64_t step, absl::Span<const float> grad,
                                   absl::Span<const float> params, absl::Span<float> out) {
  if (absl::Status s = CheckGroup(group); !s.ok()) return s;
  Group& g = groups_[group];
  if (grad.size() != g.dim || out.size() != g.dim || (!params.empty() && params.size() != g.dim)) {
    return absl::InvalidArgumentError(absl::StrCat("group ", group, " has ", g.dim, " elements; got a gradient of ",
                                                   grad.size(), ", an output of ", out.size(), " and parameters of ",
                                                   params.size()));
  }
  if (g.scheme->needs_parameters() && params.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(settings_.scheme, " needs the group's parameter values"));
  }
  if (settings_.check_finite) {
    if (absl::Status s = CheckAllFinite(group, step, grad); !s.ok()) return s;
  }
  std::optional<absl::StatusOr<ExchangeResult>> outcome;
  g.scheme->Exchange(step, 0, grad, params, [&outcome](absl::StatusOr<ExchangeResult> r) { outcome = std::move(r); });
  if (!outcome.has_value()) return absl::InternalError("the scheme did not finish the exchange");
  if (!outcome->ok()) return outcome->status();
  ExchangeResult& result = **outcome;
  const Update& update = result.update;
  if (std::optional<size_t> bad = FirstNonFinite(update.values); bad.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat("diverged: non-finite update at step ", step, " in group ",
                                                      group, " (element ", *bad, " of the update's values)"));
  }
  const float scale = 1.0f / static_cast<float>(settings_.world_size);
  if (update.dense) {
    if (update.values.size() != g.dim) {
      return absl::InternalError(absl::StrCat("dense update of ", update.values.size(), " values for ", g.dim));
    }
    for (size_t i = 0; i < g.dim; ++i) out[i] = update.values[i] * scale;
  } else {
    std::fill(out.begin(), out.end(), 0.0f);
    for (size_t i = 0; i < update.indices.size(); ++i) {
      if (update.indices[i] >= g.dim) {
        return absl::InternalError(absl::StrCat("update index ", update.indices[i], " is outside ", g.dim));
      }
      out[update.indices[i]] = update.values[i] * scale;
    }
  }
  if (absl::Status s = g.scheme->OnApplied(0, update); !s.ok()) return s;
  ++stats_.exchanges;
  if (!any_step_ || step != last_step_) ++stats_.steps;
  any_step_ = true;
  last_step_ = step;
  stats_.bytes_sent += result.bytes_sent;
  stats_.dense_bytes += result.dense_bytes;
  stats_.compress_s += Seconds(result.spans, "compress");
  stats_.communicate_s += Seconds(result.spans, "communicate");
  stats_.decode_s += Seconds(result.spans, "decode");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<float>>> HookSession::SaveState(int group) const {
  if (absl::Status s = CheckGroup(group); !s.ok()) return s;
  return groups_[group].scheme->SaveState();
}

absl::Status HookSession::RestoreState(int group, const std::vector<std::vector<float>>& state) {
  if (absl::Status s = CheckGroup(group); !s.ok()) return s;
  return groups_[group].scheme->RestoreState(state);
}

std::string HookSession::StatsJson() const {
  return absl::StrFormat(
      "{\"steps\": %d, \"exchanges\": %d, \"bytes_sent\": %d, \"dense_bytes\": %d, \"compress_s\": %.9g, "
      "\"communicate_s\": %.9g, \"decode_s\": %.9g, \"check_s\": %.9g}",
      stats_.steps, stats_.exchanges, stats_.bytes_sent, stats_.dense_bytes, stats_.compress_s, stats_.communicate_s,
      stats_.decode_s, stats_.check_s);
}

}  // namespace sketchfuse
