#include "worker/training/workloads.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/compressor_registry.h"
#include "common/model_profiles.h"
#include "worker/training/language_model_workload.h"
#include "worker/training/models.h"
#include "worker/training/synthetic_runner.h"

namespace sketchfuse {

bool IsSyntheticWorkload(const std::string& workload) { return ModelProfileByName(workload).ok(); }

std::vector<std::string> WorkloadNames() {
  std::vector<std::string> names = KnownClassifiers();
  names.push_back(kCharLmWorkload);
  for (const std::string& profile : ModelProfileNames()) names.push_back(profile);
  return names;
}

absl::Status DescribeRun(uint32_t world_size, v1::RunConfig* run, const std::string& corpus_dir) {
  if (world_size == 0) return absl::InvalidArgumentError("the world size is 0");
  run->clear_layer_sizes();
  run->clear_layer_rows();
  if (IsSyntheticWorkload(run->workload())) return DescribeSyntheticRun(run);
  if (run->batch_size() == 0) return absl::InvalidArgumentError("the batch size is 0");
  std::vector<int64_t> sizes, rows;
  int64_t available = 0;  // training examples
  if (run->workload() == kCharLmWorkload) {
    absl::StatusOr<LanguageModelDescription> model = DescribeLanguageModel(corpus_dir, run->seed());
    if (!model.ok()) return model.status();
    sizes = model->parameter_sizes;
    rows = model->parameter_rows;
    available = model->train_windows;
  } else {
    absl::StatusOr<std::shared_ptr<ClassifierImpl>> model = MakeClassifier(run->workload(), run->seed());
    if (!model.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown workload '", run->workload(), "'; the workloads are ",
                                                     absl::StrJoin(WorkloadNames(), ", ")));
    }
    sizes = ParameterSizes(**model);
    for (const torch::Tensor& p : (*model)->parameters()) rows.push_back(p.dim() > 1 ? p.size(0) : 1);
    available = kFashionMnistTrainExamples;
  }
  for (auto it = sizes.rbegin(); it != sizes.rend(); ++it) run->add_layer_sizes(static_cast<uint64_t>(*it));
  // The shapes, for a method that compresses matrices (only then: a run of
  // another method keeps the fingerprint it always had).
  run->clear_layer_rows();
  if (absl::StatusOr<std::unique_ptr<Compressor>> compressor = CompressorRegistry::Default().Create(run->compressor());
      compressor.ok() && (*compressor)->sums_factor_rounds()) {
    for (auto it = rows.rbegin(); it != rows.rend(); ++it) run->add_layer_rows(static_cast<uint64_t>(*it));
  }
  const int64_t used =
      run->train_examples() > 0 ? std::min<int64_t>(run->train_examples(), available) : available;
  const int64_t shard = used / world_size;
  const int64_t steps = shard / run->batch_size();
  if (steps < 1) {
    return absl::InvalidArgumentError(absl::StrCat("batch size ", run->batch_size(), " is larger than a worker's ",
                                                   shard, " training examples"));
  }
  run->set_steps_per_epoch(static_cast<uint32_t>(steps));
  return absl::OkStatus();
}

}  // namespace sketchfuse
