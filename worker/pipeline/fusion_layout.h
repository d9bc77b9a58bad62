// Where each layer's values lie in the fusion buffers, and back. The model's
// gradient is read as one flat vector: the layers' values one after another,
// in layer order. A group of the plan is a contiguous range of that vector;
// its buffer holds the range. Groups of the fusion plan start and end at
// layer boundaries; the partitions a job cuts them into (common/partitioning.h)
// may start or end inside a layer, so a layer lies in one or more groups,
// as pieces. Fusion writes each piece of layer l at its offset in its group's
// buffer; the inverse reads a layer's values back at layer_begin(l) of the
// flat vector, which is how a worker unfuses an aggregated update into its
// parameters' gradients.
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

// A group of the plan: elements [begin, begin + size) of the flat gradient.
struct GroupLayout {
  int64_t begin = 0;
  int64_t size = 0;
};

// The part of a layer that lies in one group: `size` elements from element
// `layer_offset` of the layer, at element `group_offset` of the group.
struct LayerPiece {
  int group = 0;
  int64_t group_offset = 0;
  int64_t layer_offset = 0;
  int64_t size = 0;
};

class FusionLayout {
 public:
  // INVALID_ARGUMENT, naming the group or layer, unless every layer has at
  // least one element and the groups are non-empty consecutive ranges that
  // cover the flat gradient exactly once.
  static absl::StatusOr<FusionLayout> Create(std::vector<int64_t> layer_sizes, std::vector<GroupLayout> groups);

  int num_layers() const { return static_cast<int>(layer_sizes_.size()); }
  int num_groups() const { return static_cast<int>(groups_.size()); }
  int64_t layer_size(int layer) const { return layer_sizes_[layer]; }
  const GroupLayout& group(int group) const { return groups_[group]; }
  // Elements of a group's buffer.
  int64_t group_size(int group) const { return groups_[group].size; }
  const std::vector<int64_t>& group_sizes() const { return group_sizes_; }
  // Elements of the flat gradient (the model's parameters).
  int64_t total_size() const { return total_size_; }

  // Fusion: the pieces of `layer`, in order (one unless a partition boundary
  // falls inside it), and the number of layers with a piece in `group` (the
  // group is complete when they are all in).
  const std::vector<LayerPiece>& pieces(int layer) const { return pieces_[layer]; }
  int layers_in_group(int group) const { return layers_in_group_[group]; }

  // The inverse: the first element of `layer` in the flat gradient, and
  // `layer`'s values within `flat` (total_size() values; the caller keeps
  // to that contract, as with every accessor here).
  int64_t layer_begin(int layer) const { return layer_begins_[layer]; }
  // The layer that holds `element` of the flat gradient (0 <= element <
  // total_size()).
  int LayerAt(int64_t element) const;
  absl::Span<const float> LayerOf(int layer, absl::Span<const float> flat) const {
    return flat.subspan(static_cast<size_t>(layer_begins_[layer]), static_cast<size_t>(layer_sizes_[layer]));
  }

 private:
  FusionLayout() = default;

  std::vector<int64_t> layer_sizes_;
  std::vector<int64_t> layer_begins_;
  std::vector<GroupLayout> groups_;
  std::vector<int64_t> group_sizes_;
  std::vector<std::vector<LayerPiece>> pieces_;
  std::vector<int> layers_in_group_;
  int64_t total_size_ = 0;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_PIPELINE_FUSION_LAYOUT_H_
