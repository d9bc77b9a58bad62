#include "worker/pipeline/fusion_layout.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace sketchfuse {

absl::StatusOr<FusionLayout> FusionLayout::Create(std::vector<int64_t> layer_sizes, std::vector<GroupLayout> groups) {
  int next = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].first_layer != next || groups[g].num_layers < 1) {
      return absl::InvalidArgumentError(absl::StrCat("group ", g, " starts at layer ", groups[g].first_layer,
                                                     " with ", groups[g].num_layers,
                                                     " layers; expected a non-empty range from layer ", next));
    }
    if (groups[g].num_layers > static_cast<int>(layer_sizes.size()) - next) {
      return absl::InvalidArgumentError(absl::StrCat("group ", g, " ends at layer ",
                                                     int64_t{next} + groups[g].num_layers, "; the model has ",
                                                     layer_sizes.size()));
    }
    next += groups[g].num_layers;
  }
  if (next != static_cast<int>(layer_sizes.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("the groups cover ", next, " layers; the model has ", layer_sizes.size()));
  }
  FusionLayout layout;
  layout.layer_offsets_.resize(layer_sizes.size());
  layout.group_of_layer_.resize(layer_sizes.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    int64_t offset = 0;
    for (int l = groups[g].first_layer; l < groups[g].first_layer + groups[g].num_layers; ++l) {
      if (layer_sizes[l] <= 0) return absl::InvalidArgumentError(absl::StrCat("layer ", l, " is empty"));
      layout.layer_offsets_[l] = offset;
      layout.group_of_layer_[l] = static_cast<int>(g);
      offset += layer_sizes[l];
    }
    layout.group_sizes_.push_back(offset);
  }
  layout.layer_sizes_ = std::move(layer_sizes);
  layout.groups_ = std::move(groups);
  return layout;
}

}  // namespace sketchfuse
