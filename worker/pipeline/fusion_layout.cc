#include "worker/pipeline/fusion_layout.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sketchfuse {

absl::StatusOr<FusionLayout> FusionLayout::Create(std::vector<int64_t> layer_sizes, std::vector<GroupLayout> groups) {
  FusionLayout layout;
  for (size_t l = 0; l < layer_sizes.size(); ++l) {
    if (layer_sizes[l] <= 0) return absl::InvalidArgumentError(absl::StrCat("layer ", l, " is empty"));
    layout.layer_begins_.push_back(layout.total_size_);
    layout.total_size_ += layer_sizes[l];
  }
  int64_t next = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].begin != next || groups[g].size < 1) {
      return absl::InvalidArgumentError(absl::StrCat("group ", g, " holds elements [", groups[g].begin, ", ",
                                                     groups[g].begin + groups[g].size,
                                                     "); expected a non-empty range from element ", next));
    }
    if (groups[g].size > layout.total_size_ - next) {
      return absl::InvalidArgumentError(absl::StrCat("group ", g, " ends at element ", next + groups[g].size,
                                                     "; the model has ", layout.total_size_));
    }
    next += groups[g].size;
  }
  if (next != layout.total_size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("the groups cover ", next, " elements; the model has ", layout.total_size_));
  }
  // Walk layers and groups together, cutting each layer at group boundaries.
  layout.pieces_.resize(layer_sizes.size());
  layout.layers_in_group_.assign(groups.size(), 0);
  size_t g = 0;
  for (size_t l = 0; l < layer_sizes.size(); ++l) {
    int64_t at = layout.layer_begins_[l];
    const int64_t end = at + layer_sizes[l];
    while (at < end) {
      while (groups[g].begin + groups[g].size <= at) ++g;
      const int64_t piece_end = std::min(end, groups[g].begin + groups[g].size);
      layout.pieces_[l].push_back(
          {static_cast<int>(g), at - groups[g].begin, at - layout.layer_begins_[l], piece_end - at});
      ++layout.layers_in_group_[g];
      at = piece_end;
    }
  }
  for (const GroupLayout& group : groups) layout.group_sizes_.push_back(group.size);
  layout.layer_sizes_ = std::move(layer_sizes);
  layout.groups_ = std::move(groups);
  return layout;
}

int FusionLayout::LayerAt(int64_t element) const {
  // The last layer that begins at or before `element`.
  const auto after = std::upper_bound(layer_begins_.begin(), layer_begins_.end(), element);
  return static_cast<int>(after - layer_begins_.begin()) - 1;
}

}  // namespace sketchfuse
