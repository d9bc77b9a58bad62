// A worker's fusion buffers: one contiguous buffer per group of the plan,
// into which the step pipeline copies each layer's gradient at its offset.
// The host implementation is here; a GPU worker's buffers live in device
// memory (worker/gpu/device_memory.h).
//
// Thread-safety: writes to disjoint ranges may run concurrently; a group is
// sealed once all its layers are written, and read (Get) only after that.
#ifndef SKETCHFUSE_WORKER_PIPELINE_FUSION_BUFFERS_H_
#define SKETCHFUSE_WORKER_PIPELINE_FUSION_BUFFERS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "worker/core/gradient_view.h"

namespace sketchfuse {

class FusionBuffers {
 public:
  virtual ~FusionBuffers() = default;

  // Copies `values` into group `group` at element `offset`. Host values are
  // copied when Write returns; device values may still be in flight, and
  // must stay unchanged until the group is sealed. The caller checks that the
  // range fits the group. FAILED_PRECONDITION for values these buffers cannot
  // read (device memory into host buffers), or a device error.
  virtual absl::Status Write(int group, int64_t offset, GradientView values) = 0;

  // Completes every write to `group` (the pipeline calls it once the group's
  // last layer is written). A device error if a copy failed.
  virtual absl::Status Seal(int group) { return absl::OkStatus(); }

  // The group's fused values, valid until the group is written again.
  virtual GradientView Get(int group) const = 0;
};

// Buffers in host memory, one per size; they accept host values only.
std::unique_ptr<FusionBuffers> MakeHostFusionBuffers(const std::vector<int64_t>& group_sizes);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_PIPELINE_FUSION_BUFFERS_H_
