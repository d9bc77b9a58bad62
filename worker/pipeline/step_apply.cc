#include "worker/pipeline/step_apply.h"

#include <utility>

namespace sketchfuse {

absl::StatusOr<std::vector<Update>> ReconcileStep(AggregationScheme& scheme, uint64_t step,
                                                  std::vector<absl::StatusOr<ExchangeResult>>& results) {
  if (absl::Status reconciled = scheme.Reconcile(step, results); !reconciled.ok()) return reconciled;
  for (const absl::StatusOr<ExchangeResult>& result : results) {
    if (!result.ok()) return result.status();
  }
  std::vector<Update> updates;
  updates.reserve(results.size());
  for (absl::StatusOr<ExchangeResult>& result : results) updates.push_back(std::move(result->update));
  return updates;
}

absl::Status SettleStep(AggregationScheme& scheme, const std::vector<Update>& updates) {
  for (size_t g = 0; g < updates.size(); ++g) {
    if (absl::Status s = scheme.OnApplied(static_cast<int>(g), updates[g]); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace sketchfuse
