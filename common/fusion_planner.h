// Fusion planning: which contiguous groups of layers a worker fuses.
//
// Workers fuse the gradients of many layers into contiguous groups; each group
// is compressed and communicated as soon as all its layers' gradients exist,
// overlapping the rest of the backward pass. Layers are always given in
// BACKWARD order (the layer whose gradient is produced first comes first), and
// a group is a contiguous run of them.
//
// The step-time model (SimulateStepTime) has two resources:
//   compute device   runs the backward of every layer in order; right after the
//                    last layer of a group finishes, the group's compress runs
//                    on the same device and delays the layers after it;
//   pipeline (FIFO)  transfers and decodes groups one at a time, in order.
//
// Planners: PlanOptimal (exact minimum of the model), PlanOmgsGreedy (the
// OMGS-SGD greedy merge), PlanMergeCompSearch (MergeComp's two-group search
// driven by measurements), and the fixed PlanPerLayer, PlanSingle,
// PlanEqualGroups. PlanByMode selects one by its --fusion name, and
// AssignGroupsToShards spreads groups over aggregation server shards.
#ifndef SKETCHFUSE_COMMON_FUSION_PLANNER_H_
#define SKETCHFUSE_COMMON_FUSION_PLANNER_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/cost_model.h"

namespace sketchfuse {

// One layer, given in backward order (first produced first): its gradient
// element count and the seconds its backward takes on the compute device.
struct LayerTiming {
  int64_t num_elements = 0;
  double backward_seconds = 0;
};

// Contiguous layers [first_layer, first_layer + num_layers) in backward order,
// holding num_elements gradient elements in all.
struct FusionGroup {
  int first_layer = 0;
  int num_layers = 0;
  int64_t num_elements = 0;
};

// A partition of the layers into groups, in backward order.
struct FusionPlan {
  std::vector<FusionGroup> groups;
};

// OK when the groups of `plan` are non-empty, contiguous, in order, cover
// every layer of `layers` exactly once, and each group's num_elements is the
// sum of its layers' counts. Otherwise INVALID_ARGUMENT naming the first
// problem (gap, overlap, empty group, out of range, wrong element count,
// layers left uncovered). No layers and no groups is a valid plan.
absl::Status ValidatePlan(absl::Span<const LayerTiming> layers,
                          const FusionPlan& plan);

// Simulated time in seconds of one training step under `model`:
//   compute device: the backward of the layers in order; right after the last
//     layer of group g finishes its backward, compress(n_g) runs on the same
//     device, delaying later layers; ready_g is the time it ends.
//   pipeline (FIFO): start_g = max(ready_g, end_{g-1});
//     end_g = start_g + (transfer(n_g) + decode(n_g)).
// Returns the end of the last group (0 for a plan without groups).
// Precondition: ValidatePlan(layers, plan) is OK; layer indices out of range
// are ignored rather than read.
double SimulateStepTime(absl::Span<const LayerTiming> layers,
                        const FusionPlan& plan, const GroupCostModel& model);

// The partition into contiguous groups that minimizes SimulateStepTime
// (exactly, up to floating-point rounding in the last bits). Dynamic
// programming over prefixes keeping, per prefix, the Pareto front of
// (compute-device time, pipeline end time) states; both transitions are
// monotone non-decreasing in both coordinates, so dominated states are
// dropped. Among equally good plans, the one found first is returned.
// INVALID_ARGUMENT for no layers, a non-positive element count, a negative or
// non-finite backward time, or a non-finite cost-model coefficient.
absl::StatusOr<FusionPlan> PlanOptimal(absl::Span<const LayerTiming> layers,
                                       const GroupCostModel& model);

// The OMGS-SGD greedy merge. Walks the layers in backward order keeping a
// current group (the first layer opens it). For the next layer l, with p_cur
// the current group's elements and p_l the layer's:
//   slack  = max(0, pipeline free time after the closed groups
//                   - time the current group would be ready if closed now),
//   t_wait = t_b[l] + compress(p_cur + p_l) - compress(p_cur) - compress(p_l)
//            - slack,
//   t_save = T(p_cur) + T(p_l) - T(p_cur + p_l), T(n) = transfer(n) + decode(n);
// l joins the current group when t_wait < t_save, else opens a new one.
// Same INVALID_ARGUMENT cases as PlanOptimal.
absl::StatusOr<FusionPlan> PlanOmgsGreedy(absl::Span<const LayerTiming> layers,
                                          const GroupCostModel& model);

// MergeComp-style search over two-group plans: split s in [1, L] puts layers
// [0, s) in the first group and [s, L) in the second; s = L is the single
// group. `measure(s)` returns the measured step time of split s (the caller's
// timing function, e.g. 5 warm-up and 20 timed iterations). Assuming the time
// is unimodal in s, binary-searches the sign of measure(s + 1) - measure(s),
// memoizing measurements, and returns the plan of the best split measured.
// With L = 1 the single group is returned without measuring. If `probes` is
// not null it receives the number of calls to `measure`.
// INVALID_ARGUMENT for no layers, a non-positive element count, an empty
// `measure`, or a measurement that is negative or not finite.
absl::StatusOr<FusionPlan> PlanMergeCompSearch(
    absl::Span<const LayerTiming> layers,
    const std::function<double(int split)>& measure, int* probes = nullptr);

// One group per layer (no groups for no layers).
FusionPlan PlanPerLayer(absl::Span<const LayerTiming> layers);

// One group of all layers (no groups for no layers).
FusionPlan PlanSingle(absl::Span<const LayerTiming> layers);

// min(num_groups, L) contiguous, non-empty groups of about equal element
// counts: the boundary of group g is the layer boundary whose prefix element
// count is closest to g/N of the total (ties to the lower boundary), within
// the range that keeps every group non-empty. No groups for no layers.
// INVALID_ARGUMENT for num_groups < 1 or a non-positive element count.
absl::StatusOr<FusionPlan> PlanEqualGroups(absl::Span<const LayerTiming> layers,
                                           int num_groups);

// The plan for a --fusion mode: "optimal", "omgs", "mergecomp", "per_layer",
// "single", or a positive integer N (PlanEqualGroups with N groups). The
// layers are validated as for PlanOptimal in every mode. "mergecomp" runs
// PlanMergeCompSearch with SimulateStepTime under `model` as its timing
// function (a search driven by live step times calls PlanMergeCompSearch
// itself). Zero or negative N and unknown modes are INVALID_ARGUMENT listing
// the valid modes.
absl::StatusOr<FusionPlan> PlanByMode(absl::string_view mode,
                                      absl::Span<const LayerTiming> layers,
                                      const GroupCostModel& model);

// Assigns the groups of `plan` to `num_shards` aggregation server shards,
// balancing element counts by longest-processing-time greedy: groups by
// decreasing num_elements (ties: lower group index first), each to the
// currently least-loaded shard (ties: lower shard index). Returns the shard
// index of each group, indexed like plan.groups. INVALID_ARGUMENT for
// num_shards < 1 or a group of negative size. Loads saturate at INT64_MAX
// (sizes from a hostile job file must not overflow).
absl::StatusOr<std::vector<int>> AssignGroupsToShards(const FusionPlan& plan,
                                                      int num_shards);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_FUSION_PLANNER_H_
