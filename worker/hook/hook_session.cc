#include "worker/hook/hook_session.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/compressor_registry.h"
#include "common/partitioning.h"
#include "common/payload.h"
#include "worker/gpu/device_memory.h"
#include "worker/gpu/device_vectors.h"
#include "worker/pipeline/job_plan.h"
#include "worker/pipeline/step_stats.h"
#include "worker/pipeline/trace_writer.h"
#include "worker/schemes/scheme_factory.h"
#include "worker/schemes/scheme_registry.h"
#include "worker/training/optimizer_spec.h"
#include "absl/synchronization/mutex.h"
#include "proto/rpc_channel.h"

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
    // PowerSGD needs the layers' shapes, which DDP's buckets do not carry.
    if (scheme.route == Route::kDecentralized && scheme.compressor != "powersgd") names.push_back(scheme.name);
  }
  return absl::StrJoin(names, ", ");
}

// The mean update into DDP's bucket: zero where a sparse update carries
// nothing (the bucket is the gradient PyTorch's optimizer applies).
absl::Status WriteOnHost(const Update& update, float scale, absl::Span<float> out) {
  if (!update.dense) std::fill(out.begin(), out.end(), 0.0f);
  return ForEachMeanValue(update, out.size(), scale, [out](uint64_t i, float mean) { out[i] = mean; });
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
    } else if (key == "optimizer") {
      absl::StatusOr<OptimizerSpec> spec = ParseOptimizerSpec(value);
      if (!spec.ok()) return absl::InvalidArgumentError(absl::StrCat("setting ", spec.status().message()));
      settings.optimizer = spec->Canonical();
    } else if (key == "release_cap") {
      if (!absl::SimpleAtod(value, &settings.release_cap) || !std::isfinite(settings.release_cap) ||
          settings.release_cap < 0) {
        return BadValue(key, value, "a finite number >= 0");
      }
    } else if (key == "coordinator" || key == "job" || key == "worker_id" || key == "token_file" ||
               key == "tls_ca" || key == "tls_cert" || key == "tls_key" || key == "join_credential_file") {
      if (value.size() > 4096) return BadValue(key, value.substr(0, 40), "at most 4096 characters");
      std::string& field = key == "coordinator"            ? settings.coordinator
                           : key == "job"                  ? settings.job
                           : key == "worker_id"            ? settings.worker_id
                           : key == "token_file"           ? settings.token_file
                           : key == "tls_ca"               ? settings.tls_ca
                           : key == "tls_cert"             ? settings.tls_cert
                           : key == "join_credential_file" ? settings.join_credential_file
                                                           : settings.tls_key;
      field = std::string(value);
    } else if (key == "join_timeout_s" || key == "push_timeout_s" || key == "push_attempts" ||
               key == "probe_every") {
      int* field = key == "join_timeout_s"   ? &settings.join_timeout_s
                   : key == "push_timeout_s" ? &settings.push_timeout_s
                   : key == "push_attempts"  ? &settings.push_attempts
                                             : &settings.probe_every;
      if (!absl::SimpleAtoi(value, field) || *field < 1 || *field > 86400) {
        return BadValue(key, value, "an integer in [1, 86400]");
      }
    } else if (key == "partition_elements") {
      uint64_t bound = 0;
      if (!ParsePartitionElements(value, &bound)) {
        return BadValue(key, value, "a number of elements (0: no cut)");
      }
      settings.partition_elements = bound;
    } else if (key == "num_shards") {
      if (!absl::SimpleAtoi(value, &settings.num_shards) || settings.num_shards < 1 || settings.num_shards > 4096) {
        return BadValue(key, value, "an integer in [1, 4096]");
      }
    } else if (key == "device") {
      if (value != "cpu" && value != "cuda") return BadValue(key, value, "cpu or cuda");
      settings.device = std::string(value);
    } else if (key == "gpu") {
      if (!absl::SimpleAtoi(value, &settings.gpu) || settings.gpu < 0 || settings.gpu > 1023) {
        return BadValue(key, value, "a GPU index in [0, 1023]");
      }
    } else if (key == "error_feedback" || key == "second_round" || key == "check_finite") {
      absl::StatusOr<bool> flag = ParseBool(key, value);
      if (!flag.ok()) return flag.status();
      (key == "error_feedback" ? settings.error_feedback
                               : key == "second_round" ? settings.second_round : settings.check_finite) = *flag;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown setting '", key.substr(0, 80),
          "' (known: scheme, compressor, rank, world_size, seed, momentum, optimizer, error_feedback, release_cap, "
          "second_round, check_finite, device, gpu, coordinator, job, worker_id, token_file, tls_ca, tls_cert, tls_key, "
          "join_credential_file, "
          "join_timeout_s, push_timeout_s, push_attempts, probe_every, num_shards, partition_elements)"));
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
  if (scheme->route != Route::kDecentralized && settings.coordinator.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("setting 'coordinator': '", settings.scheme,
                                                   "' aggregates on the servers; give the job's coordinator "
                                                   "(host:port), or run a decentralized scheme (",
                                                   HookSchemes(), ")"));
  }
  if (scheme->route == Route::kDecentralized && settings.partition_elements.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat("setting 'partition_elements': '", settings.scheme,
                                                   "' runs over the process group; partitions spread a job over "
                                                   "its servers"));
  }
  if (scheme->route == Route::kDecentralized && !settings.coordinator.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("setting 'coordinator': '", settings.scheme,
                                                   "' runs over the process group and joins no coordinator"));
  }
  if (settings.on_gpu() && !settings.coordinator.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("setting 'device': '", settings.scheme,
                                                   "' aggregates on the servers; device=cuda serves the "
                                                   "decentralized count_sketch scheme (sketch_allreduce)"));
  }
  if (!settings.coordinator.empty() && settings.job.empty()) {
    return absl::InvalidArgumentError("setting 'job': the job's name is empty");
  }
  if (settings.worker_id.empty()) settings.worker_id = absl::StrCat("hook-", settings.rank);
  if (settings.compressor.empty()) settings.compressor = scheme->default_compressor_spec;
  if (absl::Status s = CheckSchemeCompressor(settings.scheme, settings.compressor); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("setting 'compressor': ", s.message()));
  }
  // A low-rank method compresses each layer as a matrix: the hook sees
  // DDP's flat buckets, not the layers' shapes (HookSchemes leaves it out).
  if (absl::StatusOr<std::unique_ptr<Compressor>> c = CompressorRegistry::Default().Create(settings.compressor);
      c.ok() && (*c)->sums_factor_rounds()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scheme '", settings.scheme, "' (", settings.compressor,
        ") compresses each layer as a matrix and needs the layers' shapes, which the hook does not have (DDP hands "
        "it flat buckets); train it with sketchfuse_worker's workloads"));
  }
  if (absl::Status s = CheckRunScheme(HookRun(settings)); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("settings: ", s.message()));
  }
  return settings;
}

std::string HookSettingsText(const HookSettings& s) {
  std::string text = absl::StrFormat(
      "scheme=%s\ncompressor=%s\nrank=%d\nworld_size=%d\nseed=%d\nmomentum=%.17g\nerror_feedback=%d\n"
      "release_cap=%.17g\nsecond_round=%d\ncheck_finite=%d\n",
      s.scheme, s.compressor, s.rank, s.world_size, s.seed, s.momentum, s.error_feedback, s.release_cap,
      s.second_round, s.check_finite);
  absl::StrAppend(&text, "device=", s.device, "\n");
  if (!s.optimizer.empty()) absl::StrAppend(&text, "optimizer=", s.optimizer, "\n");
  if (s.num_shards != 1) absl::StrAppend(&text, "num_shards=", s.num_shards, "\n");
  if (s.partition_elements.has_value()) absl::StrAppend(&text, "partition_elements=", *s.partition_elements, "\n");
  if (s.on_gpu()) absl::StrAppend(&text, "gpu=", s.gpu, "\n");
  if (s.joins_coordinator()) {
    absl::StrAppendFormat(&text,
                          "coordinator=%s\njob=%s\nworker_id=%s\ntoken_file=%s\ntls_ca=%s\ntls_cert=%s\n"
                          "tls_key=%s\njoin_credential_file=%s\njoin_timeout_s=%d\npush_timeout_s=%d\n"
                          "push_attempts=%d\nprobe_every=%d\n",
                          s.coordinator, s.job, s.worker_id, s.token_file, s.tls_ca, s.tls_cert, s.tls_key,
                          s.join_credential_file,
                          s.join_timeout_s, s.push_timeout_s, s.push_attempts, s.probe_every);
  }
  return text;
}

v1::RunConfig HookJobRun(const HookSettings& settings, const std::vector<uint64_t>& layer_sizes) {
  v1::RunConfig run = HookRun(settings);
  run.set_fusion("optimal");
  for (uint64_t size : layer_sizes) run.add_layer_sizes(size);
  return run;
}

absl::StatusOr<v1::JobConfig> HookJobConfig(const HookSettings& settings, const std::vector<uint64_t>& layer_sizes) {
  if (layer_sizes.empty()) return absl::InvalidArgumentError("the model has no parameters");
  for (size_t i = 0; i < layer_sizes.size(); ++i) {
    if (layer_sizes[i] == 0 || layer_sizes[i] > UINT32_MAX) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter ", i, " (backward order) has ", layer_sizes[i], " elements; 1 to 2^32 - 1"));
    }
  }
  absl::StatusOr<v1::JobConfig> job =
      MakeJobConfig(settings.job, static_cast<uint32_t>(settings.world_size), HookJobRun(settings, layer_sizes),
                    /*round_deadline_ms=*/60000, static_cast<uint32_t>(settings.num_shards));
  if (!job.ok()) return job.status();
  job->set_finished_rounds_kept(16);
  return job;
}

v1::RunConfig HookRun(const HookSettings& settings) {
  v1::RunConfig run;
  run.set_workload(kHookWorkload);
  run.set_scheme(settings.scheme);
  run.set_compressor(settings.compressor);
  run.set_fusion("single");
  run.set_seed(settings.seed);
  run.set_momentum(settings.momentum);
  run.set_optimizer(settings.optimizer);
  run.set_error_feedback(settings.error_feedback);
  run.set_release_cap(settings.release_cap);
  run.set_second_round(SecondRoundFor(settings.scheme, settings.second_round));
  run.set_device(settings.on_gpu() ? "gpu" : "cpu");
  if (settings.partition_elements.has_value()) run.set_partition_elements(*settings.partition_elements);
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

absl::StatusOr<std::unique_ptr<HookSession>> HookSession::Join(HookSettings settings,
                                                               const std::vector<uint64_t>& layer_sizes,
                                                               std::unique_ptr<Collective> collective) {
  if (!settings.joins_coordinator()) {
    return absl::InvalidArgumentError(absl::StrCat("'", settings.scheme, "' joins no coordinator"));
  }
  if (settings.on_gpu()) {
    return absl::InvalidArgumentError("device=cuda serves the decentralized sketch_allreduce, not a joined session");
  }
  absl::StatusOr<v1::JobConfig> planned = HookJobConfig(settings, layer_sizes);
  if (!planned.ok()) return planned.status();
  absl::StatusOr<std::unique_ptr<HookSession>> made = Create(settings, std::move(collective));
  if (!made.ok()) return made.status();
  HookSession& session = **made;
  absl::StatusOr<RpcChannelOptions> channel =
      LoadRpcChannelOptions(settings.token_file, settings.tls_ca, settings.tls_cert, settings.tls_key);
  if (!channel.ok()) return channel.status();
  if (!settings.join_credential_file.empty()) {
    absl::StatusOr<std::string> credential = ReadJoinCredential(settings.join_credential_file);
    if (!credential.ok()) return credential.status();
    channel->join_credential = *credential;
  }
  session.coordinator_ =
      std::make_unique<CoordinatorClient>(settings.coordinator, settings.job, settings.worker_id, *channel);
  // The partitions are the job's (its shards') unless the settings state a
  // bound, which must then be the job's.
  v1::RunConfig run = planned->run();
  if (!settings.partition_elements.has_value()) run.clear_partition_elements();
  absl::StatusOr<v1::JoinReply> joined = session.coordinator_->Join(run, absl::Seconds(settings.join_timeout_s));
  if (!joined.ok()) {
    return absl::Status(joined.status().code(), absl::StrCat("joining job '", settings.job, "' at ",
                                                             settings.coordinator, ": ", joined.status().message()));
  }
  if (joined->rank() != static_cast<uint32_t>(settings.rank)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the coordinator gave worker '", settings.worker_id, "' rank ", joined->rank(), "; the process group's rank is ",
        settings.rank, " (ranks follow the worker ids in natural order: give each rank's id in the same order)"));
  }
  session.coordinator_->StartHeartbeats(absl::Seconds(2));
  SchemeEnvironment environment;
  environment.rpc = *channel;
  environment.rpc.worker_proof = joined->worker_proof();  // every push proves the rank
  environment.retry.push_deadline = absl::Seconds(settings.push_timeout_s);
  environment.retry.max_attempts = settings.push_attempts;
  if (NeedsCollective(settings.scheme)) environment.collective = session.collective_.get();
  environment.hybrid.probe_every = settings.probe_every;
  absl::StatusOr<BuiltScheme> built = MakeScheme(*joined, environment);
  if (!built.ok()) return built.status();
  session.job_scheme_ = std::move(built->scheme);
  session.fit_warnings_ = JobFitWarnings(joined->job());
  uint64_t offset = 0;
  for (const v1::GroupConfig& group : joined->job().groups()) {
    session.group_offset_.push_back(offset);
    session.group_dim_.push_back(group.dim());
    offset += group.dim();
  }
  uint64_t total = 0;
  for (uint64_t size : layer_sizes) total += size;
  if (offset != total) {
    return absl::FailedPreconditionError(absl::StrCat("the job's groups hold ", offset, " elements; the model has ",
                                                      total));
  }
  return made;
}

int HookSession::num_groups() const {
  return joined() ? static_cast<int>(group_dim_.size()) : static_cast<int>(groups_.size());
}

uint64_t HookSession::group_dim(int group) const { return joined() ? group_dim_[group] : groups_[group].dim; }

absl::StatusOr<int> HookSession::AddGroup(uint64_t dim) {
  if (joined()) return absl::FailedPreconditionError("a joined session's groups are the job's");
  if (dim == 0 || dim > UINT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("a group has 1 to 2^32 - 1 elements; got ", dim));
  }
  if (absl::Status s = UseSessionGpu(); !s.ok()) return s;
  v1::RunConfig run = HookRun(settings_);
  run.add_layer_sizes(dim);
  absl::StatusOr<v1::JobConfig> job = MakeJobConfig(kHookWorkload, static_cast<uint32_t>(settings_.world_size), run);
  if (!job.ok()) return job.status();
  absl::StatusOr<std::unique_ptr<CollectiveScheme>> scheme = CollectiveScheme::Create(*job, collective_.get());
  if (!scheme.ok()) return scheme.status();
  groups_.push_back(Group{dim, *std::move(scheme)});
  // Each group's own warnings by its bucket group; the run's once, with the first group.
  for (const std::string& warning : GroupFitWarnings(*job)) {
    fit_warnings_.push_back(absl::StrCat("bucket group ", groups_.size() - 1, ": ", warning));
  }
  if (groups_.size() == 1) {
    for (std::string& warning : RunFitWarnings(*job)) fit_warnings_.push_back(std::move(warning));
  }
  return static_cast<int>(groups_.size()) - 1;
}

absl::Status HookSession::CheckGroup(int group) const {
  if (group < 0 || group >= num_groups()) {
    return absl::InvalidArgumentError(absl::StrCat("group ", group, " does not exist (", num_groups(), " groups)"));
  }
  return absl::OkStatus();
}

absl::Status HookSession::CheckAllFinite(uint64_t step, const std::optional<std::string>& local) {
  const absl::Time begin = absl::Now();
  std::vector<float> flags(settings_.world_size, 0.0f);
  if (local.has_value()) flags[settings_.rank] = 1.0f;
  absl::Status reduced = collective_->AllReduceSum(absl::MakeSpan(flags));
  stats_.check_s += absl::ToDoubleSeconds(absl::Now() - begin);
  if (!reduced.ok()) return reduced;
  std::vector<int> ranks;
  for (int r = 0; r < settings_.world_size; ++r) {
    if (flags[r] != 0.0f) ranks.push_back(r);
  }
  if (ranks.empty()) return absl::OkStatus();
  std::string message = absl::StrCat("diverged: non-finite gradient at step ", step, " on rank",
                                      ranks.size() > 1 ? "s " : " ", absl::StrJoin(ranks, ", "));
  if (local.has_value()) absl::StrAppend(&message, " (this rank's first: ", *local, ")");
  return absl::FailedPreconditionError(message);
}

absl::Status HookSession::FinishStep(uint64_t step) {
  if (joined() || !settings_.check_finite) return absl::OkStatus();
  std::optional<std::string> local;
  if (nonfinite_.has_value() && nonfinite_step_ == step) local = nonfinite_;
  nonfinite_.reset();
  return CheckAllFinite(step, local);
}

absl::Status HookSession::Exchange(int group, uint64_t step, absl::Span<const float> grad,
                                   absl::Span<const float> params, absl::Span<float> out) {
  if (joined()) return absl::FailedPreconditionError("a joined session exchanges whole steps (ExchangeStep)");
  if (settings_.on_gpu()) {
    return absl::FailedPreconditionError("a session of device=cuda exchanges device memory (ExchangeOnDevice)");
  }
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
  std::vector<float> zeros;
  if (settings_.check_finite) {
    if (std::optional<size_t> bad = FirstNonFinite(grad); bad.has_value()) {
      // Exchanged as zeros, so nothing non-finite reaches the other ranks or
      // the residual; FinishStep stops every rank at this step.
      NoteNonFinite(group, step, *bad);
      zeros.assign(g.dim, 0.0f);
      grad = zeros;
    }
  }
  absl::StatusOr<ExchangeResult> result = RunExchange(group, step, grad, params);
  if (!result.ok()) return result.status();
  if (absl::Status s = CheckUpdateFinite(group, step, result->update); !s.ok()) return s;
  if (absl::Status s = WriteOnHost(result->update, MeanScale(), out); !s.ok()) return s;
  return Applied(group, step, *result);
}

absl::Status HookSession::ExchangeOnDevice(int group, uint64_t step, const float* grad, float* out, uint64_t dim) {
  if (joined()) return absl::FailedPreconditionError("a joined session exchanges whole steps (ExchangeStep)");
  if (!settings_.on_gpu()) {
    return absl::FailedPreconditionError("a session of device=cpu exchanges host memory (Exchange)");
  }
  if (absl::Status s = CheckGroup(group); !s.ok()) return s;
  Group& g = groups_[group];
  if (dim != g.dim) {
    return absl::InvalidArgumentError(absl::StrCat("group ", group, " has ", g.dim, " elements; got ", dim));
  }
  if (grad == nullptr || out == nullptr) return absl::InvalidArgumentError("no gradient or no output");
  if (g.scheme->needs_parameters()) {
    return absl::InvalidArgumentError(absl::StrCat(settings_.scheme, " needs parameter values (not on the GPU)"));
  }
  if (absl::Status s = UseSessionGpu(); !s.ok()) return s;
  GradientView view = GradientView::OnDevice(grad, dim);
  DeviceArray zeros;
  if (settings_.check_finite) {
    absl::StatusOr<std::optional<size_t>> bad = FirstNonFiniteOnDevice(view);
    if (!bad.ok()) return bad.status();
    if (bad->has_value()) {
      NoteNonFinite(group, step, **bad);
      absl::StatusOr<DeviceArray> uploaded = DeviceArray::Upload(std::vector<float>(dim, 0.0f));
      if (!uploaded.ok()) return uploaded.status();
      zeros = *std::move(uploaded);
      view = zeros.view();
    }
  }
  absl::StatusOr<ExchangeResult> result = RunExchange(group, step, view, {});
  if (!result.ok()) return result.status();
  const Update& update = result->update;
  if (absl::Status s = CheckUpdateFinite(group, step, update); !s.ok()) return s;
  if (update.dense) return absl::InternalError("a device exchange decoded a dense update");
  std::vector<float> mean(update.values.size());
  for (size_t i = 0; i < mean.size(); ++i) mean[i] = update.values[i] * MeanScale();
  if (absl::Status s = WriteSparseOnDevice(update.indices, mean, out, dim); !s.ok()) return s;
  return Applied(group, step, *result);
}

absl::Status HookSession::UseSessionGpu() const {
  return settings_.on_gpu() ? UseGpu(settings_.gpu) : absl::OkStatus();
}

void HookSession::NoteNonFinite(int group, uint64_t step, size_t index) {
  if (!nonfinite_.has_value() || nonfinite_step_ != step) {
    nonfinite_ = absl::StrCat("group ", group, ", index ", index);
    nonfinite_step_ = step;
  }
}

absl::StatusOr<ExchangeResult> HookSession::RunExchange(int group, uint64_t step, GradientView grad,
                                                        absl::Span<const float> params) {
  std::optional<absl::StatusOr<ExchangeResult>> outcome;
  groups_[group].scheme->Exchange(step, 0, grad, params,
                                  [&outcome](absl::StatusOr<ExchangeResult> r) { outcome = std::move(r); });
  if (!outcome.has_value()) return absl::InternalError("the scheme did not finish the exchange");
  return *std::move(outcome);
}

absl::Status HookSession::CheckUpdateFinite(int group, uint64_t step, const Update& update) const {
  if (std::optional<size_t> bad = FirstNonFinite(update.values); bad.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat("diverged: non-finite update at step ", step, " in group ",
                                                      group, " (element ", *bad, " of the update's values)"));
  }
  return absl::OkStatus();
}

absl::Status HookSession::Applied(int group, uint64_t step, const ExchangeResult& result) {
  if (absl::Status s = groups_[group].scheme->OnApplied(0, result.update); !s.ok()) return s;
  Count(step, result);
  return absl::OkStatus();
}

void HookSession::Count(uint64_t step, const ExchangeResult& result) {
  ++stats_.exchanges;
  if (!any_step_ || step != last_step_) ++stats_.steps;
  any_step_ = true;
  last_step_ = step;
  stats_.bytes_sent += result.bytes_sent;
  stats_.bytes_received += result.bytes_received;
  stats_.dense_bytes += result.dense_bytes;
  stats_.compress_s += Seconds(result.spans, "compress");
  stats_.communicate_s += Seconds(result.spans, "communicate");
  stats_.decode_s += Seconds(result.spans, "decode");
}

absl::Status HookSession::ExchangeStep(uint64_t step, absl::Span<const float> grad, absl::Span<float> out) {
  if (!joined()) return absl::FailedPreconditionError("ExchangeStep is for a joined session; use Exchange");
  const uint64_t total = group_offset_.back() + group_dim_.back();
  if (grad.size() != total || out.size() != total) {
    return absl::InvalidArgumentError(absl::StrCat("the job's model has ", total, " elements; got a gradient of ",
                                                   grad.size(), " and an output of ", out.size()));
  }
  if (settings_.check_finite) {
    std::optional<std::string> local;
    if (std::optional<size_t> bad = FirstNonFinite(grad); bad.has_value()) local = absl::StrCat("index ", *bad);
    if (absl::Status s = CheckAllFinite(step, local); !s.ok()) return s;
  }
  const int groups = num_groups();
  absl::Mutex mu;
  int pending = groups;
  std::vector<absl::StatusOr<ExchangeResult>> results(groups, absl::UnknownError("not exchanged"));
  for (int g = 0; g < groups; ++g) {
    job_scheme_->Exchange(step, g, grad.subspan(group_offset_[g], group_dim_[g]), {},
                          [&mu, &pending, &results, g](absl::StatusOr<ExchangeResult> r) {
                            absl::MutexLock lock(&mu);
                            results[g] = std::move(r);
                            --pending;
                          });
  }
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(+[](int* n) { return *n == 0; }, &pending));
  }
  // The step ends as the worker's does (worker/pipeline/step_apply.h).
  absl::StatusOr<std::vector<Update>> updates = ReconcileStep(*job_scheme_, step, results);
  if (!updates.ok()) {
    // A group's own failure is named with its group and step.
    for (int g = 0; g < groups; ++g) {
      if (!results[g].ok() && results[g].status() == updates.status()) {
        return absl::Status(results[g].status().code(),
                            absl::StrCat("group ", g, " at step ", step, ": ", results[g].status().message()));
      }
    }
    return updates.status();
  }
  for (int g = 0; g < groups; ++g) {
    if (absl::Status s = CheckUpdateFinite(g, step, (*updates)[g]); !s.ok()) return s;
    if (absl::Status s = WriteOnHost((*updates)[g], MeanScale(), out.subspan(group_offset_[g], group_dim_[g]));
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = SettleStep(*job_scheme_, *updates); !s.ok()) return s;
  for (int g = 0; g < groups; ++g) Count(step, *results[g]);
  return absl::OkStatus();
}

absl::StatusOr<GroupState> HookSession::SaveState(int group) const {
  if (absl::Status s = CheckGroup(group); !s.ok()) return s;
  if (absl::Status s = UseSessionGpu(); !s.ok()) return s;
  std::vector<GroupState> all = joined() ? job_scheme_->SaveState() : groups_[group].scheme->SaveState();
  const size_t index = joined() ? static_cast<size_t>(group) : 0;  // a bucket is a one-group job
  if (index >= all.size()) return absl::InternalError("the scheme's state has the wrong shape");
  return std::move(all[index]);
}

absl::Status HookSession::RestoreState(int group, const GroupState& state) {
  if (absl::Status s = CheckGroup(group); !s.ok()) return s;
  if (absl::Status s = UseSessionGpu(); !s.ok()) return s;
  if (!joined()) return groups_[group].scheme->RestoreState({state});
  std::vector<GroupState> all = job_scheme_->SaveState();
  if (static_cast<size_t>(group) >= all.size()) return absl::InternalError("the job's state has the wrong shape");
  all[group] = state;
  return job_scheme_->RestoreState(all);
}

std::string HookSession::StatsJson() const {
  GroupCompressors::PeelRecovery recovery;
  auto add = [&recovery](const AggregationScheme& scheme) {
    const GroupCompressors::PeelRecovery r = scheme.peel_recovery();
    recovery.inserted += r.inserted;
    recovery.recovered += r.recovered;
    recovery.settlements += r.settlements;
  };
  if (job_scheme_ != nullptr) add(*job_scheme_);
  for (const Group& group : groups_) add(*group.scheme);
  const double share = recovery.settlements > 0 && recovery.inserted > 0 ? recovery.share() : -1;
  std::vector<std::string> warnings = fit_warnings_;
  if (std::string w = PeelRecoveryWarning(share); !w.empty()) warnings.push_back(w);
  std::string quoted;
  for (const std::string& w : warnings) absl::StrAppend(&quoted, quoted.empty() ? "" : ", ", JsonString(w));
  return absl::StrFormat(
      "{\"steps\": %d, \"exchanges\": %d, \"bytes_sent\": %d, \"bytes_received\": %d, \"dense_bytes\": %d, "
      "\"compress_s\": %.9g, "
      "\"communicate_s\": %.9g, \"decode_s\": %.9g, \"check_s\": %.9g, \"peel_recovered_share\": %s, "
      "\"warnings\": [%s]}",
      stats_.steps, stats_.exchanges, stats_.bytes_sent, stats_.bytes_received, stats_.dense_bytes, stats_.compress_s,
      stats_.communicate_s,
      stats_.decode_s, stats_.check_s, share >= 0 ? absl::StrFormat("%.6f", share) : std::string("null"), quoted);
}

}  // namespace sketchfuse
