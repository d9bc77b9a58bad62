// GradientView: a read-only view of gradient values that live either in host
// memory or, on a GPU worker, in device memory. The step pipeline and the
// aggregation schemes pass gradients as views, so one code path serves both
// placements; only the code that touches the values (the fusion buffers and
// the group compressors) looks at where they are.
#ifndef SKETCHFUSE_WORKER_CORE_GRADIENT_VIEW_H_
#define SKETCHFUSE_WORKER_CORE_GRADIENT_VIEW_H_

#include <cstddef>
#include <type_traits>

#include "absl/types/span.h"

namespace sketchfuse {

class GradientView {
 public:
  GradientView() = default;
  // Host memory (implicit: every host span, vector or array converts).
  GradientView(absl::Span<const float> host) : host_(host), size_(host.size()) {}  // NOLINT
  template <typename Container,
            typename = std::enable_if_t<std::is_convertible_v<const Container&, absl::Span<const float>> &&
                                        !std::is_same_v<Container, absl::Span<const float>>>>
  GradientView(const Container& host) : GradientView(absl::Span<const float>(host)) {}  // NOLINT

  // `size` floats at `data` in device memory.
  static GradientView OnDevice(const float* data, size_t size) {
    GradientView view;
    view.device_ = data;
    view.size_ = size;
    return view;
  }

  // `size` values from `offset` (within size(); the caller checks), in the
  // same memory.
  GradientView Sub(size_t offset, size_t size) const {
    if (device_ != nullptr) return OnDevice(device_ + offset, size);
    return GradientView(host_.subspan(offset, size));
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  bool on_device() const { return device_ != nullptr; }
  // The host values; empty for a view of device memory.
  absl::Span<const float> host() const { return host_; }
  // The device values; null for a view of host memory.
  const float* device() const { return device_; }

 private:
  absl::Span<const float> host_;
  const float* device_ = nullptr;
  size_t size_ = 0;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_CORE_GRADIENT_VIEW_H_
