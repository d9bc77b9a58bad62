// Fusion planners and the step-time simulation they optimise.
#include "common/fusion_planner.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <queue>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace sketchfuse {
namespace {

constexpr char kValidModes[] =
    "\"optimal\", \"omgs\", \"mergecomp\", \"per_layer\", \"single\", or a "
    "positive integer N (N groups of about equal size)";

// Layer count fits in int, non-empty, positive element counts whose total fits
// in int64.
absl::Status ValidateLayerCounts(absl::Span<const LayerTiming> layers) {
  if (layers.empty()) return absl::InvalidArgumentError("no layers to plan");
  if (layers.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError(
        absl::StrCat("too many layers: ", layers.size()));
  }
  int64_t total = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    const int64_t n = layers[i].num_elements;
    if (n <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer ", i, " has a non-positive element count ", n));
    }
    if (n > std::numeric_limits<int64_t>::max() - total) {
      return absl::InvalidArgumentError(absl::StrCat(
          "total element count overflows int64 at layer ", i));
    }
    total += n;
  }
  return absl::OkStatus();
}

// ValidateLayerCounts plus finite, non-negative backward times.
absl::Status ValidateLayers(absl::Span<const LayerTiming> layers) {
  RETURN_IF_ERROR(ValidateLayerCounts(layers));
  for (size_t i = 0; i < layers.size(); ++i) {
    const double t = layers[i].backward_seconds;
    if (!std::isfinite(t) || t < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer ", i, " has a negative or non-finite backward time ", t));
    }
  }
  return absl::OkStatus();
}

// Every coefficient of the model is finite.
absl::Status ValidateModel(const GroupCostModel& model) {
  const std::pair<const char*, const LinearCost*> costs[] = {
      {"compress", &model.compress},
      {"transfer", &model.transfer},
      {"decode", &model.decode}};
  for (const auto& [name, cost] : costs) {
    if (!std::isfinite(cost->alpha) || !std::isfinite(cost->beta)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cost model '", name, "' has a non-finite coefficient (alpha=",
          cost->alpha, ", beta=", cost->beta, ")"));
    }
  }
  return absl::OkStatus();
}

// Pipeline time of a group of n elements: transfer then decode.
double PipelineSeconds(const GroupCostModel& model, double n) {
  return model.transfer(n) + model.decode(n);
}

// Appends the group of layers [first, end) to `plan`.
void AppendGroup(absl::Span<const LayerTiming> layers, int first, int end,
                 FusionPlan& plan) {
  int64_t n = 0;
  for (int l = first; l < end; ++l) n += layers[l].num_elements;
  plan.groups.push_back(FusionGroup{first, end - first, n});
}

// The two-group plan of MergeComp split s (s == L: one group).
FusionPlan SplitPlan(absl::Span<const LayerTiming> layers, int split) {
  const int num_layers = static_cast<int>(layers.size());
  FusionPlan plan;
  AppendGroup(layers, 0, split, plan);
  if (split < num_layers) AppendGroup(layers, split, num_layers, plan);
  return plan;
}

// A DP state at a prefix: compute-device time (after the last group's
// compress), pipeline end time, and where it came from.
struct State {
  double compute;
  double pipeline;
  int parent_prefix;
  int parent_index;
};

}  // namespace

absl::Status ValidatePlan(absl::Span<const LayerTiming> layers,
                          const FusionPlan& plan) {
  const int64_t num_layers = static_cast<int64_t>(layers.size());
  int64_t next = 0;
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    const FusionGroup& group = plan.groups[g];
    if (group.first_layer > next) {
      return absl::InvalidArgumentError(absl::StrCat(
          "group ", g, " starts at layer ", group.first_layer,
          ", leaving a gap: expected layer ", next));
    }
    if (group.first_layer < next) {
      return absl::InvalidArgumentError(absl::StrCat(
          "group ", g, " starts at layer ", group.first_layer,
          ", overlapping the previous group: expected layer ", next));
    }
    if (group.num_layers < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "group ", g, " is empty (num_layers=", group.num_layers, ")"));
    }
    const int64_t end = next + group.num_layers;
    if (end > num_layers) {
      return absl::InvalidArgumentError(absl::StrCat(
          "group ", g, " covers layers [", next, ", ", end,
          ") beyond the last layer ", num_layers - 1));
    }
    int64_t elements = 0;
    for (int64_t l = next; l < end; ++l) elements += layers[l].num_elements;
    if (elements != group.num_elements) {
      return absl::InvalidArgumentError(absl::StrCat(
          "group ", g, " has num_elements=", group.num_elements,
          " but its layers hold ", elements));
    }
    next = end;
  }
  if (next != num_layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the plan covers layers [0, ", next, ") of ", num_layers,
        "; the rest are in no group"));
  }
  return absl::OkStatus();
}

double SimulateStepTime(absl::Span<const LayerTiming> layers,
                        const FusionPlan& plan, const GroupCostModel& model) {
  const int64_t num_layers = static_cast<int64_t>(layers.size());
  double compute = 0;
  double pipeline = 0;
  for (const FusionGroup& group : plan.groups) {
    const int64_t first = std::max<int64_t>(group.first_layer, 0);
    const int64_t end = std::min<int64_t>(
        static_cast<int64_t>(group.first_layer) + group.num_layers, num_layers);
    for (int64_t l = first; l < end; ++l) compute += layers[l].backward_seconds;
    const double n = static_cast<double>(group.num_elements);
    compute += model.compress(n);
    pipeline = std::max(compute, pipeline) + PipelineSeconds(model, n);
  }
  return pipeline;
}

absl::StatusOr<FusionPlan> PlanOptimal(absl::Span<const LayerTiming> layers,
                                       const GroupCostModel& model) {
  RETURN_IF_ERROR(ValidateLayers(layers));
  RETURN_IF_ERROR(ValidateModel(model));
  const int num_layers = static_cast<int>(layers.size());

  std::vector<int64_t> elements(num_layers + 1, 0);
  std::vector<double> backward(num_layers + 1, 0);
  for (int l = 0; l < num_layers; ++l) {
    elements[l + 1] = elements[l] + layers[l].num_elements;
    backward[l + 1] = backward[l] + layers[l].backward_seconds;
  }

  // fronts[i]: Pareto front of the states after the first i layers, sorted by
  // compute ascending (and so pipeline strictly descending).
  std::vector<std::vector<State>> fronts(num_layers + 1);
  fronts[0].push_back(State{0, 0, -1, -1});
  std::vector<State> candidates;
  for (int j = 1; j <= num_layers; ++j) {
    candidates.clear();
    for (int i = 0; i < j; ++i) {
      const double n = static_cast<double>(elements[j] - elements[i]);
      const double work = (backward[j] - backward[i]) + model.compress(n);
      const double comm = PipelineSeconds(model, n);
      const std::vector<State>& from = fronts[i];
      for (int k = 0; k < static_cast<int>(from.size()); ++k) {
        const double compute = from[k].compute + work;
        const double pipeline = std::max(compute, from[k].pipeline) + comm;
        candidates.push_back(State{compute, pipeline, i, k});
      }
    }
    std::sort(candidates.begin(), candidates.end(),
              [](const State& a, const State& b) {
                if (a.compute != b.compute) return a.compute < b.compute;
                if (a.pipeline != b.pipeline) return a.pipeline < b.pipeline;
                if (a.parent_prefix != b.parent_prefix) {
                  return a.parent_prefix < b.parent_prefix;
                }
                return a.parent_index < b.parent_index;
              });
    std::vector<State>& front = fronts[j];
    double best_pipeline = std::numeric_limits<double>::infinity();
    for (const State& s : candidates) {
      if (s.pipeline < best_pipeline) {
        front.push_back(s);
        best_pipeline = s.pipeline;
      }
    }
  }

  // The last state of the final front has the smallest pipeline end.
  std::vector<int> ends;
  int prefix = num_layers;
  int index = static_cast<int>(fronts[num_layers].size()) - 1;
  while (prefix > 0) {
    ends.push_back(prefix);
    const State& s = fronts[prefix][index];
    prefix = s.parent_prefix;
    index = s.parent_index;
  }
  std::reverse(ends.begin(), ends.end());
  FusionPlan plan;
  int first = 0;
  for (int end : ends) {
    AppendGroup(layers, first, end, plan);
    first = end;
  }
  return plan;
}

absl::StatusOr<FusionPlan> PlanOmgsGreedy(absl::Span<const LayerTiming> layers,
                                          const GroupCostModel& model) {
  RETURN_IF_ERROR(ValidateLayers(layers));
  RETURN_IF_ERROR(ValidateModel(model));
  const int num_layers = static_cast<int>(layers.size());
  auto total = [&](double n) { return PipelineSeconds(model, n); };

  FusionPlan plan;
  // Simulation of the closed groups: compute-device time after the last
  // closed group's compress, and the time the pipeline becomes free.
  double closed_compute = 0;
  double closed_pipeline = 0;
  int cur_first = 0;
  int64_t cur_elements = layers[0].num_elements;
  double cur_backward = layers[0].backward_seconds;
  auto close_current = [&](int end) {
    const double p = static_cast<double>(cur_elements);
    closed_compute += cur_backward + model.compress(p);
    closed_pipeline = std::max(closed_compute, closed_pipeline) + total(p);
    plan.groups.push_back(FusionGroup{cur_first, end - cur_first, cur_elements});
  };
  for (int l = 1; l < num_layers; ++l) {
    const double p_cur = static_cast<double>(cur_elements);
    const double p_l = static_cast<double>(layers[l].num_elements);
    const double ready_now =
        closed_compute + cur_backward + model.compress(p_cur);
    const double slack = std::max(0.0, closed_pipeline - ready_now);
    const double t_wait = layers[l].backward_seconds +
                          model.compress(p_cur + p_l) - model.compress(p_cur) -
                          model.compress(p_l) - slack;
    const double t_save = total(p_cur) + total(p_l) - total(p_cur + p_l);
    if (t_wait < t_save) {
      cur_elements += layers[l].num_elements;
      cur_backward += layers[l].backward_seconds;
    } else {
      close_current(l);
      cur_first = l;
      cur_elements = layers[l].num_elements;
      cur_backward = layers[l].backward_seconds;
    }
  }
  close_current(num_layers);
  return plan;
}

absl::StatusOr<FusionPlan> PlanMergeCompSearch(
    absl::Span<const LayerTiming> layers,
    const std::function<double(int split)>& measure, int* probes) {
  if (probes != nullptr) *probes = 0;
  RETURN_IF_ERROR(ValidateLayerCounts(layers));
  if (!measure) {
    return absl::InvalidArgumentError("PlanMergeCompSearch: no measure function");
  }
  const int num_layers = static_cast<int>(layers.size());
  if (num_layers == 1) return SplitPlan(layers, 1);

  // memo[s]: measured time of split s, NaN when not measured yet.
  std::vector<double> memo(num_layers + 1,
                           std::numeric_limits<double>::quiet_NaN());
  int calls = 0;
  auto measured = [&](int split) -> absl::StatusOr<double> {
    if (!std::isnan(memo[split])) return memo[split];
    const double t = measure(split);
    ++calls;
    if (probes != nullptr) *probes = calls;
    if (!std::isfinite(t) || t < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "PlanMergeCompSearch: measure(", split,
          ") returned a negative or non-finite time ", t));
    }
    memo[split] = t;
    return t;
  };

  int lo = 1;
  int hi = num_layers;
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    ASSIGN_OR_RETURN(const double at_mid, measured(mid));
    ASSIGN_OR_RETURN(const double after_mid, measured(mid + 1));
    if (after_mid < at_mid) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  int best = -1;
  for (int s = 1; s <= num_layers; ++s) {
    if (!std::isnan(memo[s]) && (best < 0 || memo[s] < memo[best])) best = s;
  }
  return SplitPlan(layers, best);
}

FusionPlan PlanPerLayer(absl::Span<const LayerTiming> layers) {
  FusionPlan plan;
  plan.groups.reserve(layers.size());
  for (int l = 0; l < static_cast<int>(layers.size()); ++l) {
    plan.groups.push_back(FusionGroup{l, 1, layers[l].num_elements});
  }
  return plan;
}

FusionPlan PlanSingle(absl::Span<const LayerTiming> layers) {
  FusionPlan plan;
  if (!layers.empty()) {
    AppendGroup(layers, 0, static_cast<int>(layers.size()), plan);
  }
  return plan;
}

absl::StatusOr<FusionPlan> PlanEqualGroups(absl::Span<const LayerTiming> layers,
                                           int num_groups) {
  if (num_groups < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "number of equal groups must be at least 1, got ", num_groups));
  }
  if (layers.empty()) return FusionPlan{};
  RETURN_IF_ERROR(ValidateLayerCounts(layers));
  const int num_layers = static_cast<int>(layers.size());
  const int n = std::min(num_groups, num_layers);
  std::vector<int64_t> prefix(num_layers + 1, 0);
  for (int l = 0; l < num_layers; ++l) {
    prefix[l + 1] = prefix[l] + layers[l].num_elements;
  }
  const double total = static_cast<double>(prefix[num_layers]);

  FusionPlan plan;
  int first = 0;
  for (int g = 1; g < n; ++g) {
    const double target = total * g / n;
    const int lo = first + 1;              // group g - 1 non-empty
    const int hi = num_layers - (n - g);   // groups g..n-1 non-empty
    auto it = std::lower_bound(prefix.begin() + lo, prefix.begin() + hi + 1,
                               target, [](int64_t p, double t) {
                                 return static_cast<double>(p) < t;
                               });
    int end = static_cast<int>(it - prefix.begin());
    if (end > hi) {
      end = hi;
    } else if (end > lo &&
               target - static_cast<double>(prefix[end - 1]) <=
                   static_cast<double>(prefix[end]) - target) {
      end = end - 1;
    }
    AppendGroup(layers, first, end, plan);
    first = end;
  }
  AppendGroup(layers, first, num_layers, plan);
  return plan;
}

absl::StatusOr<FusionPlan> PlanByMode(absl::string_view mode,
                                      absl::Span<const LayerTiming> layers,
                                      const GroupCostModel& model) {
  int num_groups = 0;
  const bool is_number = absl::SimpleAtoi(mode, &num_groups);
  if (is_number && num_groups < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--fusion=", mode, ": the number of groups must be positive; valid "
        "modes are ", kValidModes));
  }
  if (!is_number && mode != "optimal" && mode != "omgs" && mode != "mergecomp" &&
      mode != "per_layer" && mode != "single") {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown --fusion mode \"", mode, "\"; valid modes are ", kValidModes));
  }
  RETURN_IF_ERROR(ValidateLayers(layers));
  if (is_number) return PlanEqualGroups(layers, num_groups);
  if (mode == "optimal") return PlanOptimal(layers, model);
  if (mode == "omgs") return PlanOmgsGreedy(layers, model);
  if (mode == "mergecomp") {
    // MergeComp's search with the model as its stopwatch.
    return PlanMergeCompSearch(layers, [&](int split) {
      return SimulateStepTime(layers, SplitPlan(layers, split), model);
    });
  }
  if (mode == "per_layer") return PlanPerLayer(layers);
  return PlanSingle(layers);
}

absl::StatusOr<std::vector<int>> AssignGroupsToShards(const FusionPlan& plan,
                                                      int num_shards) {
  if (num_shards < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "number of shards must be at least 1, got ", num_shards));
  }
  const size_t num_groups = plan.groups.size();
  for (size_t g = 0; g < num_groups; ++g) {
    if (plan.groups[g].num_elements < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("group ", g, " has a negative size (", plan.groups[g].num_elements, ")"));
    }
  }
  std::vector<size_t> order(num_groups);
  for (size_t g = 0; g < num_groups; ++g) order[g] = g;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return plan.groups[a].num_elements > plan.groups[b].num_elements;
  });
  // Min-heap of (load, shard): least load first, then lower shard index.
  using Entry = std::pair<int64_t, int>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> shards;
  // Shards past the group count never receive a group: leave them out.
  const int used = static_cast<int>(
      std::min<size_t>(static_cast<size_t>(num_shards), std::max<size_t>(num_groups, 1)));
  for (int s = 0; s < used; ++s) shards.push({0, s});
  std::vector<int> assignment(num_groups, 0);
  for (size_t g : order) {
    Entry least = shards.top();
    shards.pop();
    assignment[g] = least.second;
    const int64_t size = plan.groups[g].num_elements;
    least.first = size > std::numeric_limits<int64_t>::max() - least.first ? std::numeric_limits<int64_t>::max()
                                                                             : least.first + size;
    shards.push(least);
  }
  return assignment;
}

}  // namespace sketchfuse
