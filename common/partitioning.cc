#include "common/partitioning.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace sketchfuse {

int64_t DefaultPartitionElements(absl::Span<const int64_t> group_elements, int num_shards) {
  if (num_shards <= 1) return 0;
  int64_t total = 0;
  for (int64_t n : group_elements) total += std::max<int64_t>(n, 0);
  const int64_t parts = 2 * static_cast<int64_t>(num_shards);
  return std::max(kMinDefaultPartitionElements, (total + parts - 1) / parts);
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
