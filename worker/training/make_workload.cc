#include "worker/training/make_workload.h"

#include "absl/strings/str_cat.h"
#include "worker/training/classifier_workload.h"
#include "worker/training/language_model_workload.h"
#include "worker/training/models.h"

namespace sketchfuse {

absl::StatusOr<std::unique_ptr<TorchWorkload>> MakeTorchWorkload(TorchWorkloadConfig config) {
  if (config.run.workload() == kCharLmWorkload) {
    absl::StatusOr<std::unique_ptr<LanguageModelWorkload>> made = LanguageModelWorkload::Create(std::move(config));
    if (!made.ok()) return made.status();
    return std::unique_ptr<TorchWorkload>(*std::move(made));
  }
  absl::StatusOr<std::unique_ptr<ClassifierWorkload>> made = ClassifierWorkload::Create(std::move(config));
  if (!made.ok()) return made.status();
  return std::unique_ptr<TorchWorkload>(*std::move(made));
}

}  // namespace sketchfuse
