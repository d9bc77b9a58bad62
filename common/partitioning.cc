#include "common/partitioning.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/fusion_planner.h"

namespace sketchfuse {

int64_t DefaultPartitionElements(absl::Span<const int64_t> group_elements, int num_shards) {
  if (num_shards <= 1) return 0;
  int64_t total = 0;
  for (int64_t n : group_elements) total += std::max<int64_t>(n, 0);
  int64_t bound = 0;
  for (int64_t m : {2, 4, 8}) {
    const int64_t parts = m * num_shards;
    bound = std::max(kMinDefaultPartitionElements, (total + parts - 1) / parts);
    absl::StatusOr<std::vector<Partition>> partitions = CutGroups(group_elements, bound);
    if (!partitions.ok()) return bound;  // refused where the groups are cut
    FusionPlan plan;
    for (const Partition& p : *partitions) plan.groups.push_back({0, 1, p.num_elements});
    absl::StatusOr<std::vector<int>> shard_of = AssignGroupsToShards(plan, num_shards);
    if (!shard_of.ok()) return bound;
    std::vector<int64_t> loads(num_shards, 0);
    for (size_t i = 0; i < partitions->size(); ++i) loads[(*shard_of)[i]] += (*partitions)[i].num_elements;
    const double mean = static_cast<double>(total) / num_shards;
    if (static_cast<double>(*std::max_element(loads.begin(), loads.end())) <= kDefaultBalance * mean) break;
  }
  return bound;
}

bool ParsePartitionElements(absl::string_view text, uint64_t* bound) {
  if (text.empty() || !std::all_of(text.begin(), text.end(), absl::ascii_isdigit)) return false;
  return absl::SimpleAtoi(text, bound);
}

absl::StatusOr<std::vector<Partition>> CutGroups(absl::Span<const int64_t> group_elements, int64_t bound) {
  if (bound < 0) return absl::InvalidArgumentError(absl::StrCat("the partition bound is ", bound, "; expected >= 0"));
  std::vector<Partition> partitions;
  for (size_t g = 0; g < group_elements.size(); ++g) {
    const int64_t n = group_elements[g];
    if (n < 1) return absl::InvalidArgumentError(absl::StrCat("fused group ", g, " has ", n, " elements"));
    const int64_t parts = bound == 0 ? 1 : (n + bound - 1) / bound;
    const int64_t base = n / parts, larger = n % parts;
    int64_t offset = 0;
    for (int64_t p = 0; p < parts; ++p) {
      const int64_t size = base + (p < larger ? 1 : 0);
      partitions.push_back({static_cast<int>(g), offset, size});
      offset += size;
    }
  }
  return partitions;
}

}  // namespace sketchfuse
