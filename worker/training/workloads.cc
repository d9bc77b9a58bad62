#include "worker/training/workloads.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/model_profiles.h"
#include "worker/training/models.h"
#include "worker/training/synthetic_runner.h"

namespace sketchfuse {

bool IsSyntheticWorkload(const std::string& workload) { return ModelProfileByName(workload).ok(); }

std::vector<std::string> WorkloadNames() {
  std::vector<std::string> names = KnownClassifiers();
  for (const std::string& profile : ModelProfileNames()) names.push_back(profile);
  return names;
}

absl::Status DescribeRun(uint32_t world_size, v1::RunConfig* run) {
  if (world_size == 0) return absl::InvalidArgumentError("the world size is 0");
  run->clear_layer_sizes();
  if (IsSyntheticWorkload(run->workload())) return DescribeSyntheticRun(run);
  if (run->batch_size() == 0) return absl::InvalidArgumentError("the batch size is 0");
  absl::StatusOr<std::shared_ptr<ClassifierImpl>> model = MakeClassifier(run->workload(), run->seed());
  if (!model.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown workload '", run->workload(), "'; the workloads are ",
                                                   absl::StrJoin(WorkloadNames(), ", ")));
  }
  std::vector<int64_t> sizes = ParameterSizes(**model);
  for (auto it = sizes.rbegin(); it != sizes.rend(); ++it) run->add_layer_sizes(static_cast<uint64_t>(*it));
  constexpr int64_t kFashionMnistTrain = 60000;
  const int64_t used = run->train_examples() > 0 ? std::min<int64_t>(run->train_examples(), kFashionMnistTrain)
                                                 : kFashionMnistTrain;
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
