#include "worker/hook/worker_reference.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "worker/collective/local_group.h"
#include "worker/hook/hook_session.h"
#include "worker/pipeline/job_plan.h"
#include "worker/schemes/collective_scheme.h"

namespace sketchfuse {

absl::StatusOr<std::vector<float>> WorkerSchemeMeans(const std::string& settings_text, int world, int steps,
                                                     size_t dim, absl::Span<const float> grads,
                                                     absl::Span<const float> params) {
  if (world < 1 || steps < 1 || dim < 1 || grads.size() != static_cast<size_t>(world) * steps * dim ||
      (!params.empty() && params.size() != dim)) {
    return absl::InvalidArgumentError(absl::StrCat("WorkerSchemeMeans: ", grads.size(), " gradients and ",
                                                   params.size(), " parameters for world ", world, ", ", steps,
                                                   " steps of ", dim));
  }
  std::vector<float> means(grads.size(), 0.0f);
  const std::vector<absl::Status> statuses = RunOnLocalGlooGroup(world, [&](Collective& collective) -> absl::Status {
    const int rank = collective.rank();
    absl::StatusOr<HookSettings> settings =
        ParseHookSettings(absl::StrCat(settings_text, "\nrank=", rank, "\nworld_size=", world, "\n"));
    if (!settings.ok()) return settings.status();
    v1::RunConfig run = HookRun(*settings);
    run.add_layer_sizes(dim);
    absl::StatusOr<v1::JobConfig> job = MakeJobConfig("reference", world, run);
    if (!job.ok()) return job.status();
    absl::StatusOr<std::unique_ptr<CollectiveScheme>> scheme = CollectiveScheme::Create(*job, &collective);
    if (!scheme.ok()) return scheme.status();
    const float scale = 1.0f / static_cast<float>(world);
    for (int step = 0; step < steps; ++step) {
      const size_t at = (static_cast<size_t>(step) * world + rank) * dim;
      std::optional<absl::StatusOr<ExchangeResult>> result;
      (*scheme)->Exchange(step, 0, grads.subspan(at, dim), params,
                          [&result](absl::StatusOr<ExchangeResult> r) { result = std::move(r); });
      if (!result.has_value()) return absl::InternalError("the scheme did not finish the exchange");
      if (!result->ok()) return result->status();
      const Update& u = (*result)->update;
      for (size_t i = 0; i < (u.dense ? dim : u.indices.size()); ++i) {
        means[at + (u.dense ? i : u.indices[i])] = u.values[i] * scale;
      }
      if (absl::Status s = (*scheme)->OnApplied(0, u); !s.ok()) return s;
    }
    return absl::OkStatus();
  });
  for (const absl::Status& s : statuses) {
    if (!s.ok()) return s;
  }
  return means;
}

}  // namespace sketchfuse
