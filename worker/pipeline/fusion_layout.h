// Where each layer's values lie in the fusion buffers, and back: the plan's
// groups are contiguous layer ranges, and a group's buffer holds its layers'
// values one after another, in layer order. Fusion writes layer l at
// layer_offset(l) of group group_of_layer(l)'s buffer; the inverse
// (LayerOf) reads a layer's values back out of a group's values, which is how
// a worker unfuses an aggregated update into its parameters' gradients.
//
// Layers are numbered in backward order (layer 0 is the first whose gradient
// is ready), as in the step pipeline.
#ifndef SKETCHFUSE_WORKER_PIPELINE_FUSION_LAYOUT_H_
#define SKETCHFUSE_WORKER_PIPELINE_FUSION_LAYOUT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace sketchfuse {

// A group of the plan: layers [first_layer, first_layer + num_layers).
struct GroupLayout {
  int first_layer = 0;
  int num_layers = 0;
};

class FusionLayout {
 public:
  // INVALID_ARGUMENT, naming the group or layer, unless the groups are
  // non-empty consecutive ranges that cover every layer exactly once and
  // every layer has at least one element.
  static absl::StatusOr<FusionLayout> Create(std::vector<int64_t> layer_sizes, std::vector<GroupLayout> groups);

  int num_layers() const { return static_cast<int>(layer_sizes_.size()); }
  int num_groups() const { return static_cast<int>(groups_.size()); }
  int64_t layer_size(int layer) const { return layer_sizes_[layer]; }
  const GroupLayout& group(int group) const { return groups_[group]; }
  // Elements of a group's buffer: the sum of its layers' sizes.
  int64_t group_size(int group) const { return group_sizes_[group]; }
  const std::vector<int64_t>& group_sizes() const { return group_sizes_; }

  // Fusion: the group a layer belongs to, and its first element there.
  int group_of_layer(int layer) const { return group_of_layer_[layer]; }
  int64_t layer_offset(int layer) const { return layer_offsets_[layer]; }

  // The inverse: `layer`'s values within `group_values`, the values of its
  // group's buffer (group_size(group_of_layer(layer)) of them; the caller
  // keeps to that contract, as with every accessor here).
  absl::Span<const float> LayerOf(int layer, absl::Span<const float> group_values) const {
    return group_values.subspan(static_cast<size_t>(layer_offsets_[layer]), static_cast<size_t>(layer_sizes_[layer]));
  }

 private:
  FusionLayout() = default;

  std::vector<int64_t> layer_sizes_;
  std::vector<GroupLayout> groups_;
  std::vector<int64_t> group_sizes_;
  std::vector<int> group_of_layer_;
  std::vector<int64_t> layer_offsets_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_PIPELINE_FUSION_LAYOUT_H_
