#include "worker/pipeline/fusion_buffers.h"

#include <cstring>

namespace sketchfuse {
namespace {

class HostFusionBuffers final : public FusionBuffers {
 public:
  explicit HostFusionBuffers(const std::vector<int64_t>& group_sizes) {
    for (int64_t size : group_sizes) buffers_.emplace_back(static_cast<size_t>(size));
  }

  absl::Status Write(int group, int64_t offset, GradientView values) override {
    if (values.on_device()) {
      return absl::FailedPreconditionError(
          "a gradient in device memory was given to a worker that fuses on the host (run with device=gpu)");
    }
    if (!values.empty()) {
      std::memcpy(buffers_[group].data() + offset, values.host().data(), values.size() * sizeof(float));
    }
    return absl::OkStatus();
  }

  GradientView Get(int group) const override { return absl::MakeConstSpan(buffers_[group]); }

 private:
  std::vector<std::vector<float>> buffers_;
};

}  // namespace

std::unique_ptr<FusionBuffers> MakeHostFusionBuffers(const std::vector<int64_t>& group_sizes) {
  return std::make_unique<HostFusionBuffers>(group_sizes);
}

}  // namespace sketchfuse
