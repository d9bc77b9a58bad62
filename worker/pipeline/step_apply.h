// The end of a step, written once for every caller: the trainer, the
// virtual workers, the synthetic runner (through StepPipeline) and the
// PyTorch hook (worker/hook/hook_session.h).
//
//   1. ReconcileStep: the scheme reconciles the step's group results (the
//      hybrid redoes failed groups on the other route); the first group that
//      still failed fails the step; else the groups' updates (each the SUM
//      over the job's workers).
//   2. The caller applies the mean of each update: ForEachMeanValue visits
//      exactly the coordinates an update carries (a sparse update's indices,
//      or every coordinate of a dense one) with value * (1 / world), so a
//      sparse update is applied sparsely (worker/training/trainer.h
//      ApplyMeanUpdates writes them into the model's parameters, the hook
//      into DDP's bucket).
//   3. SettleStep: once applied, each group's OnApplied, in group order, so
//      error feedback keeps what was not applied.
#ifndef SKETCHFUSE_WORKER_PIPELINE_STEP_APPLY_H_
#define SKETCHFUSE_WORKER_PIPELINE_STEP_APPLY_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/payload.h"
#include "worker/schemes/aggregation_scheme.h"

namespace sketchfuse {

// Reconciles `results` (one per group, in group order) and returns the
// updates, moved out of them (the rest of each result stays: bytes, spans).
// The reconciliation's error, or the first failed group's status as it is
// (a divergence keeps its record), otherwise.
absl::StatusOr<std::vector<Update>> ReconcileStep(AggregationScheme& scheme, uint64_t step,
                                                  std::vector<absl::StatusOr<ExchangeResult>>& results);

// OnApplied for every group's applied update, in group order; the first
// error.
absl::Status SettleStep(AggregationScheme& scheme, const std::vector<Update>& updates);

// The scale from a summed update to the mean over `world` workers.
inline float MeanScale(uint32_t world) { return 1.0f / static_cast<float>(world); }

// Calls visit(i, value * scale) for each coordinate i of `update` in a group
// of `dim` elements, in ascending order: every coordinate of a dense update,
// the indices of a sparse one. INTERNAL, before any visit, for an update
// that does not fit the group (a dense one of another size, an index at or
// past dim).
template <typename Visit>
absl::Status ForEachMeanValue(const Update& update, uint64_t dim, float scale, Visit visit) {
  if (update.dense) {
    if (update.values.size() != dim) {
      return absl::InternalError(
          absl::StrCat("a dense update of ", update.values.size(), " values for a group of ", dim));
    }
    for (uint64_t i = 0; i < dim; ++i) visit(i, update.values[i] * scale);
    return absl::OkStatus();
  }
  if (update.values.size() != update.indices.size()) {
    return absl::InternalError(absl::StrCat("a sparse update of ", update.indices.size(), " indices and ",
                                            update.values.size(), " values"));
  }
  for (const uint32_t i : update.indices) {
    if (i >= dim) {
      return absl::InternalError(absl::StrCat("update index ", i, " is outside the group of ", dim));
    }
  }
  for (size_t j = 0; j < update.indices.size(); ++j) visit(update.indices[j], update.values[j] * scale);
  return absl::OkStatus();
}

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_PIPELINE_STEP_APPLY_H_
