// The C ABI (sketchfuse_c.h) over HookSession: argument checks, status to
// error text, and no exception or C++ type crossing the boundary.
#include "worker/hook/sketchfuse_c.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "worker/hook/callback_collective.h"
#include "worker/hook/hook_session.h"
#include "proto/job_config_file.h"
#include "worker/pipeline/job_plan.h"
#include "worker/schemes/scheme_registry.h"
#include "worker/training/epoch_order.h"

struct sf_session {
  std::unique_ptr<sketchfuse::HookSession> session;
};

namespace {

int Fail(const absl::Status& status, char* err, uint64_t err_size) {
  if (err != nullptr && err_size > 0) {
    const std::string text = absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message());
    const size_t n = std::min<size_t>(text.size(), err_size - 1);
    std::memcpy(err, text.data(), n);
    err[n] = '\0';
  }
  return 1;
}

int Copy(const std::string& text, char* out, uint64_t out_size, char* err, uint64_t err_size) {
  if (out == nullptr || out_size < text.size() + 1) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("the output buffer holds ", out_size, " bytes; ",
                                                        text.size() + 1, " are needed")),
                err, err_size);
  }
  std::memcpy(out, text.c_str(), text.size() + 1);
  return 0;
}

absl::Status CheckSession(const sf_session* session) {
  if (session == nullptr || session->session == nullptr) return absl::InvalidArgumentError("no session");
  return absl::OkStatus();
}

// Part `entry` of a group's state: 0 the residual, 1 the velocity, 2 the
// method's state.
std::vector<float>* StatePart(sketchfuse::GroupState& state, int entry) {
  switch (entry) {
    case 0:
      return &state.residual;
    case 1:
      return &state.velocity;
    case 2:
      return &state.method_state;
  }
  return nullptr;
}

}  // namespace

extern "C" {

int sf_abi_version(void) { return SF_ABI_VERSION; }

void sf_bytes_assign(sf_bytes* bytes, const void* data, uint64_t size) {
  if (bytes == nullptr) return;
  bytes->data.assign(static_cast<const char*>(data), data == nullptr ? 0 : size);
}

int sf_check_settings(const char* settings, char* err, uint64_t err_size) {
  if (settings == nullptr) return Fail(absl::InvalidArgumentError("no settings"), err, err_size);
  absl::StatusOr<sketchfuse::HookSettings> parsed = sketchfuse::ParseHookSettings(settings);
  return parsed.ok() ? 0 : Fail(parsed.status(), err, err_size);
}

int sf_resolved_settings(const char* settings, char* out, uint64_t out_size, char* err, uint64_t err_size) {
  if (settings == nullptr) return Fail(absl::InvalidArgumentError("no settings"), err, err_size);
  absl::StatusOr<sketchfuse::HookSettings> parsed = sketchfuse::ParseHookSettings(settings);
  if (!parsed.ok()) return Fail(parsed.status(), err, err_size);
  return Copy(sketchfuse::HookSettingsText(*parsed), out, out_size, err, err_size);
}

int sf_scheme_traits(const char* scheme, int* compresses, int* needs_parameters, char* err, uint64_t err_size) {
  if (scheme == nullptr || compresses == nullptr || needs_parameters == nullptr) {
    return Fail(absl::InvalidArgumentError("no scheme or no output"), err, err_size);
  }
  absl::StatusOr<sketchfuse::SchemeInfo> info = sketchfuse::FindScheme(scheme);
  if (!info.ok()) return Fail(info.status(), err, err_size);
  *compresses = info->traits.worker_momentum ? 1 : 0;
  *needs_parameters = info->traits.needs_parameters ? 1 : 0;
  return 0;
}

int sf_schemes_json(char* out, uint64_t out_size, char* err, uint64_t err_size) {
  return Copy(sketchfuse::SchemesJson(), out, out_size, err, err_size);
}

}  // extern "C"

namespace {

// Parses the settings, wraps the callbacks and builds a session with
// `make`; NULL with err set on any failure.
template <typename Make>
sf_session* NewSession(const char* settings, const sf_collective_ops* ops, char* err, uint64_t err_size, Make make) {
  if (settings == nullptr || ops == nullptr) {
    Fail(absl::InvalidArgumentError("no settings or no collective callbacks"), err, err_size);
    return nullptr;
  }
  absl::StatusOr<sketchfuse::HookSettings> parsed = sketchfuse::ParseHookSettings(settings);
  if (!parsed.ok()) {
    Fail(parsed.status(), err, err_size);
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<sketchfuse::CallbackCollective>> collective =
      sketchfuse::CallbackCollective::Create(*ops, parsed->rank, parsed->world_size);
  if (!collective.ok()) {
    Fail(collective.status(), err, err_size);
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<sketchfuse::HookSession>> session = make(*std::move(parsed), *std::move(collective));
  if (!session.ok()) {
    Fail(session.status(), err, err_size);
    return nullptr;
  }
  return new sf_session{*std::move(session)};
}

}  // namespace

extern "C" {

sf_session* sf_session_create(const char* settings, const sf_collective_ops* ops, char* err, uint64_t err_size) {
  return NewSession(settings, ops, err, err_size,
                    [](sketchfuse::HookSettings parsed, std::unique_ptr<sketchfuse::Collective> collective) {
                      return sketchfuse::HookSession::Create(std::move(parsed), std::move(collective));
                    });
}

sf_session* sf_session_join(const char* settings, const uint64_t* layer_sizes, uint64_t num_layers,
                            const sf_collective_ops* ops, char* err, uint64_t err_size) {
  if (layer_sizes == nullptr && num_layers > 0) {
    Fail(absl::InvalidArgumentError("no layer sizes"), err, err_size);
    return nullptr;
  }
  const std::vector<uint64_t> layers(layer_sizes, layer_sizes + num_layers);
  return NewSession(settings, ops, err, err_size,
                    [&layers](sketchfuse::HookSettings parsed, std::unique_ptr<sketchfuse::Collective> collective) {
                      return sketchfuse::HookSession::Join(std::move(parsed), layers, std::move(collective));
                    });
}

int sf_session_exchange_step(sf_session* session, uint64_t step, const float* grad, uint64_t dim, float* out,
                             char* err, uint64_t err_size) {
  if (absl::Status s = CheckSession(session); !s.ok()) return Fail(s, err, err_size);
  if (grad == nullptr || out == nullptr) {
    return Fail(absl::InvalidArgumentError("no gradient or no output buffer"), err, err_size);
  }
  absl::Status s = session->session->ExchangeStep(step, absl::MakeConstSpan(grad, dim), absl::MakeSpan(out, dim));
  return s.ok() ? 0 : Fail(s, err, err_size);
}

int64_t sf_session_num_groups(sf_session* session) {
  if (!CheckSession(session).ok()) return -1;
  return session->session->num_groups();
}

uint64_t sf_session_group_dim(sf_session* session, int64_t group) {
  if (!CheckSession(session).ok() || group < 0 || group >= session->session->num_groups()) return 0;
  return session->session->group_dim(static_cast<int>(group));
}

int sf_write_job_config(const char* settings, const uint64_t* layer_sizes, uint64_t num_layers, const char* path,
                        char* err, uint64_t err_size) {
  if (settings == nullptr || layer_sizes == nullptr || path == nullptr) {
    return Fail(absl::InvalidArgumentError("no settings, layers or path"), err, err_size);
  }
  absl::StatusOr<sketchfuse::HookSettings> parsed = sketchfuse::ParseHookSettings(settings);
  if (!parsed.ok()) return Fail(parsed.status(), err, err_size);
  absl::StatusOr<sketchfuse::v1::JobConfig> job =
      sketchfuse::HookJobConfig(*parsed, std::vector<uint64_t>(layer_sizes, layer_sizes + num_layers));
  if (!job.ok()) return Fail(job.status(), err, err_size);
  absl::Status written = sketchfuse::WriteJobConfig(*job, path);
  return written.ok() ? 0 : Fail(written, err, err_size);
}

void sf_session_destroy(sf_session* session) { delete session; }

int64_t sf_session_add_group(sf_session* session, uint64_t dim, char* err, uint64_t err_size) {
  if (absl::Status s = CheckSession(session); !s.ok()) return -Fail(s, err, err_size);
  absl::StatusOr<int> group = session->session->AddGroup(dim);
  if (!group.ok()) return -Fail(group.status(), err, err_size);
  return *group;
}

int sf_session_exchange(sf_session* session, int64_t group, uint64_t step, const float* grad, const float* params,
                        uint64_t dim, float* out, char* err, uint64_t err_size) {
  if (absl::Status s = CheckSession(session); !s.ok()) return Fail(s, err, err_size);
  if (grad == nullptr || out == nullptr) {
    return Fail(absl::InvalidArgumentError("no gradient or no output buffer"), err, err_size);
  }
  if (group < 0 || group > INT32_MAX) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("group ", group, " does not exist")), err, err_size);
  }
  absl::Status s = session->session->Exchange(
      static_cast<int>(group), step, absl::MakeConstSpan(grad, dim),
      params == nullptr ? absl::Span<const float>() : absl::MakeConstSpan(params, dim), absl::MakeSpan(out, dim));
  return s.ok() ? 0 : Fail(s, err, err_size);
}

int sf_session_exchange_device(sf_session* session, int64_t group, uint64_t step, const float* grad, float* out,
                               uint64_t dim, char* err, uint64_t err_size) {
  if (absl::Status s = CheckSession(session); !s.ok()) return Fail(s, err, err_size);
  if (group < 0 || group > INT32_MAX) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("group ", group, " does not exist")), err, err_size);
  }
  absl::Status s = session->session->ExchangeOnDevice(static_cast<int>(group), step, grad, out, dim);
  return s.ok() ? 0 : Fail(s, err, err_size);
}

int sf_session_finish_step(sf_session* session, uint64_t step, char* err, uint64_t err_size) {
  if (absl::Status s = CheckSession(session); !s.ok()) return Fail(s, err, err_size);
  absl::Status s = session->session->FinishStep(step);
  return s.ok() ? 0 : Fail(s, err, err_size);
}

uint64_t sf_session_state_size(sf_session* session, int64_t group, int entry) {
  if (!CheckSession(session).ok() || group < 0 || group > INT32_MAX || entry < 0 || entry > 2) return 0;
  absl::StatusOr<sketchfuse::GroupState> state = session->session->SaveState(static_cast<int>(group));
  if (!state.ok()) return 0;
  return StatePart(*state, entry)->size();
}

int sf_session_save_state(sf_session* session, int64_t group, float* residual, float* velocity, float* method_state,
                          char* err, uint64_t err_size) {
  if (absl::Status s = CheckSession(session); !s.ok()) return Fail(s, err, err_size);
  if (group < 0 || group > INT32_MAX) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("group ", group, " does not exist")), err, err_size);
  }
  absl::StatusOr<sketchfuse::GroupState> state = session->session->SaveState(static_cast<int>(group));
  if (!state.ok()) return Fail(state.status(), err, err_size);
  float* targets[3] = {residual, velocity, method_state};
  static const char* const kNames[3] = {"residual", "velocity", "method state"};
  for (int e = 0; e < 3; ++e) {
    const std::vector<float>& part = *StatePart(*state, e);
    if (part.empty()) continue;
    if (targets[e] == nullptr) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("the ", kNames[e], " needs a buffer")), err, err_size);
    }
    std::memcpy(targets[e], part.data(), part.size() * sizeof(float));
  }
  return 0;
}

int sf_session_restore_state(sf_session* session, int64_t group, const float* residual, uint64_t residual_size,
                             const float* velocity, uint64_t velocity_size, const float* method_state,
                             uint64_t method_state_size, char* err, uint64_t err_size) {
  if (absl::Status s = CheckSession(session); !s.ok()) return Fail(s, err, err_size);
  if (group < 0 || group > INT32_MAX) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("group ", group, " does not exist")), err, err_size);
  }
  if ((residual == nullptr && residual_size > 0) || (velocity == nullptr && velocity_size > 0) ||
      (method_state == nullptr && method_state_size > 0)) {
    return Fail(absl::InvalidArgumentError("a state part's size is given without its data"), err, err_size);
  }
  sketchfuse::GroupState state;
  if (residual_size > 0) state.residual.assign(residual, residual + residual_size);
  if (velocity_size > 0) state.velocity.assign(velocity, velocity + velocity_size);
  if (method_state_size > 0) state.method_state.assign(method_state, method_state + method_state_size);
  absl::Status s = session->session->RestoreState(static_cast<int>(group), state);
  return s.ok() ? 0 : Fail(s, err, err_size);
}

int sf_session_stats_json(sf_session* session, char* out, uint64_t out_size) {
  if (!CheckSession(session).ok()) return 1;
  return Copy(session->session->StatsJson(), out, out_size, nullptr, 0);
}

int64_t sf_plan_groups(const uint64_t* layer_sizes, uint64_t num_layers, const char* settings, uint64_t* groups,
                       uint64_t max_groups, char* err, uint64_t err_size) {
  if (layer_sizes == nullptr || num_layers == 0 || settings == nullptr || groups == nullptr) {
    return -Fail(absl::InvalidArgumentError("no layers, settings or output"), err, err_size);
  }
  absl::StatusOr<sketchfuse::HookSettings> parsed = sketchfuse::ParseHookSettings(settings);
  if (!parsed.ok()) return -Fail(parsed.status(), err, err_size);
  sketchfuse::v1::RunConfig run = sketchfuse::HookRun(*parsed);
  run.set_fusion("optimal");
  for (uint64_t i = 0; i < num_layers; ++i) {
    if (layer_sizes[i] == 0) {
      return -Fail(absl::InvalidArgumentError(absl::StrCat("layer ", i, " has no elements")), err, err_size);
    }
    run.add_layer_sizes(layer_sizes[i]);
  }
  absl::StatusOr<sketchfuse::v1::JobConfig> job =
      sketchfuse::MakeJobConfig("plan", static_cast<uint32_t>(parsed->world_size), run);
  if (!job.ok()) return -Fail(job.status(), err, err_size);
  if (static_cast<uint64_t>(job->groups_size()) > max_groups) {
    return -Fail(absl::InvalidArgumentError(absl::StrCat("the plan has ", job->groups_size(), " groups; room for ",
                                                         max_groups)),
                 err, err_size);
  }
  for (int g = 0; g < job->groups_size(); ++g) groups[g] = job->groups(g).dim();
  return job->groups_size();
}

int sf_epoch_order(uint64_t seed, int rank, int64_t epoch, int64_t n, int64_t* out) {
  if (out == nullptr || n < 0 || rank < 0 || epoch < 0) return 1;
  const std::vector<int64_t> order = sketchfuse::EpochOrder(seed, rank, epoch, n);
  std::copy(order.begin(), order.end(), out);
  return 0;
}

}  // extern "C"
