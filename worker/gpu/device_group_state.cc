// device_group_state.h with the CUDA kernels (builds with the toolkit).
#include "worker/gpu/device_group_state.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/bf16.h"
#include "cuda/count_sketch_kernels.h"
#include "cuda/cuda_check.h"
#include "cuda/device_buffer.h"
#include "cuda/error_feedback_kernels.h"
#include "cuda/peel_kernels.h"
#include "cuda/sparse_kernels.h"
#include "cuda/topk_kernels.h"
#include "common/sketch_hash.h"
#include "worker/gpu/device_memory.h"

namespace sketchfuse {

struct DeviceGroupState::Impl {
  ~Impl() {
    if (host_table != nullptr) cudaFreeHost(host_table);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  bool peel() const { return layout.method == Compressor::SketchLayout::Method::kPeel; }
  bool candidates() const { return layout.method == Compressor::SketchLayout::Method::kCandidates; }
  // The peel, and candidates hashed per step, take the step's seed.
  bool step_seeded() const { return peel() || (candidates() && layout.hash_per_step); }

  // Copies host indices into index_scratch (growing it).
  absl::Status UploadIndices(absl::Span<const uint32_t> indices) {
    if (index_scratch.size() < indices.size()) {
      absl::StatusOr<DeviceBuffer<uint32_t>> grown = DeviceBuffer<uint32_t>::Allocate(indices.size());
      if (!grown.ok()) return grown.status();
      index_scratch = *std::move(grown);
    }
    GPU_RETURN_IF_ERROR(cudaMemcpyAsync(index_scratch.data(), indices.data(), indices.size() * sizeof(uint32_t),
                                        cudaMemcpyHostToDevice, stream),
                        "copying coordinates to the device");
    return absl::OkStatus();
  }

  // Copies host coordinates to the device (growing the index buffer) and
  // zeroes `target` (and `also`, when not null) there; all: the whole
  // vector. With `kept` nonzero (indices only), target keeps that fraction.
  absl::Status Clear(const Coordinates& coordinates, float* target, float* also, float kept = 0) {
    if (coordinates.all) {
      GPU_RETURN_IF_ERROR(cudaMemsetAsync(target, 0, dim * sizeof(float), stream), "clearing a group");
      if (also != nullptr) {
        GPU_RETURN_IF_ERROR(cudaMemsetAsync(also, 0, dim * sizeof(float), stream), "clearing a group");
      }
      return absl::OkStatus();
    }
    if (coordinates.indices.empty()) return absl::OkStatus();
    if (absl::Status s = UploadIndices(coordinates.indices); !s.ok()) return s;
    if (absl::Status s =
            kept != 0 ? LaunchKeepApplied(index_scratch.data(), coordinates.indices.size(), dim, kept, target, also,
                                          stream)
                      : LaunchClearApplied(index_scratch.data(), coordinates.indices.size(), dim, target, also, stream);
        !s.ok()) {
      return s;
    }
    // The host indices may be freed once Settle returns.
    GPU_RETURN_IF_ERROR(cudaStreamSynchronize(stream), "clearing applied coordinates");
    return absl::OkStatus();
  }

  uint64_t dim = 0;
  Compressor::SketchLayout layout;
  float momentum = -1;  // < 0: none
  cudaStream_t stream = nullptr;
  DeviceBuffer<float> residual, velocity, table;
  DeviceBuffer<uint32_t> hitter_indices, index_scratch;
  DeviceBuffer<float> hitter_values, gathered;  // gathered: ResidualAt's values
  TopKWorkspace workspace;
  PeelWorkspace peel_workspace;
  DeviceBuffer<double> norm;    // LaunchSquaredNorm's result
  float* host_table = nullptr;  // pinned, num_cells floats
  // After a peel Encode: hitter_values hold the residual at the inserted
  // coordinates (a peel Decode leaves them; the next Encode replaces them).
  bool holds_selection = false;
};

DeviceGroupState::DeviceGroupState(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DeviceGroupState::~DeviceGroupState() = default;

uint64_t DeviceGroupState::dim() const { return impl_->dim; }

absl::StatusOr<std::unique_ptr<DeviceGroupState>> DeviceGroupState::Create(const Compressor::SketchLayout& layout,
                                                                           uint64_t dim, float momentum) {
  if (absl::Status s = CheckGroupSize(dim); !s.ok()) return s;
  if (absl::Status s = ValidateSketchShape(layout.shape); !s.ok()) return s;
  if (momentum >= 1) return absl::InvalidArgumentError(absl::StrCat("momentum must be in [0, 1); got ", momentum));
  if (absl::Status s = CheckGpuWorker(); !s.ok()) return s;
  auto impl = std::make_unique<Impl>();
  impl->dim = dim;
  impl->layout = layout;
  impl->layout.heavy_hitters = std::min<uint64_t>(layout.heavy_hitters, dim);
  impl->momentum = momentum;
  GPU_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking), "creating a group's stream");
  auto allocate = [](auto& buffer, size_t n) -> absl::Status {
    auto made = std::remove_reference_t<decltype(buffer)>::Allocate(n);
    if (!made.ok()) return made.status();
    buffer = *std::move(made);
    return absl::OkStatus();
  };
  const size_t cells = layout.shape.num_cells();
  const size_t k = impl->layout.heavy_hitters;
  for (absl::Status s : {allocate(impl->residual, dim), allocate(impl->velocity, momentum >= 0 ? dim : 0),
                         allocate(impl->table, cells), allocate(impl->hitter_indices, k),
                         allocate(impl->hitter_values, k), allocate(impl->norm, 1)}) {
    if (!s.ok()) return s;
  }
  // Peel selects from the residual; estimate from a sketch's estimates.
  absl::StatusOr<TopKWorkspace> workspace = TopKWorkspace::Create(dim, /*for_sketches=*/!impl->peel());
  if (!workspace.ok()) return workspace.status();
  impl->workspace = *std::move(workspace);
  GPU_RETURN_IF_ERROR(cudaMallocHost(reinterpret_cast<void**>(&impl->host_table), cells * sizeof(float)),
                      "allocating the pinned sketch buffer");
  if (absl::Status s = impl->residual.ZeroAsync(impl->stream); !s.ok()) return s;
  if (absl::Status s = impl->velocity.ZeroAsync(impl->stream); !s.ok()) return s;
  GPU_RETURN_IF_ERROR(cudaStreamSynchronize(impl->stream), "zeroing a group's state");
  return std::unique_ptr<DeviceGroupState>(new DeviceGroupState(std::move(impl)));
}

absl::StatusOr<Payload> DeviceGroupState::Encode(GradientView grad, uint64_t step) {
  Impl& s = *impl_;
  if (!grad.on_device()) {
    return absl::InvalidArgumentError("a GPU worker's group state encodes gradients in device memory only");
  }
  if (grad.size() != s.dim) {
    return absl::InvalidArgumentError(absl::StrCat("the group has ", s.dim, " elements; got a gradient of ",
                                                   grad.size()));
  }
  s.holds_selection = false;
  float* velocity = s.momentum >= 0 ? s.velocity.data() : nullptr;
  if (absl::Status st = LaunchErrorFeedbackAccumulate(grad.device(), s.dim, std::max(s.momentum, 0.0f), velocity,
                                                      s.residual.data(), s.stream);
      !st.ok()) {
    return st;
  }
  if (absl::Status st = s.table.ZeroAsync(s.stream); !st.ok()) return st;
  Payload payload;
  payload.kind = PayloadKind::kSketch;
  payload.dim = s.dim;
  payload.sketch = s.layout.shape;
  const uint64_t k = s.layout.heavy_hitters;
  std::vector<uint32_t> inserted;
  if (s.peel()) {
    // The step's hashes; the residual's k largest entries (the CPU's
    // selection) inserted.
    payload.sketch.seed = StepSeed(s.layout.seed, step);
    if (absl::Status st = LaunchTopK(s.residual.data(), s.dim, k, s.workspace, s.hitter_indices.data(),
                                     s.hitter_values.data(), s.stream);
        !st.ok()) {
      return st;
    }
    if (absl::Status st = LaunchCountSketchInsertEntries(payload.sketch, s.hitter_indices.data(),
                                                         s.hitter_values.data(), k, s.table.data(), s.stream);
        !st.ok()) {
      return st;
    }
    inserted.resize(k);
    GPU_RETURN_IF_ERROR(cudaMemcpyAsync(inserted.data(), s.hitter_indices.data(), k * sizeof(uint32_t),
                                        cudaMemcpyDeviceToHost, s.stream),
                        "copying the inserted coordinates to the host");
  } else {
    // The whole residual: estimate under the fixed seed, candidates under the
    // step's where the layout hashes per step.
    if (s.step_seeded()) payload.sketch.seed = StepSeed(s.layout.seed, step);
    if (absl::Status st = LaunchCountSketchInsert(payload.sketch, s.residual.data(), static_cast<uint32_t>(s.dim),
                                                  s.table.data(), s.stream);
        !st.ok()) {
      return st;
    }
  }
  const size_t cells = s.layout.shape.num_cells();
  GPU_RETURN_IF_ERROR(cudaMemcpyAsync(s.host_table, s.table.data(), cells * sizeof(float), cudaMemcpyDeviceToHost,
                                      s.stream),
                      "copying the sketch to the host");
  GPU_RETURN_IF_ERROR(cudaStreamSynchronize(s.stream), "encoding a group");
  payload.values.assign(s.host_table, s.host_table + cells);
  // As the host compressor rounds its table (the wire then carries 2 bytes a
  // cell).
  if (s.candidates() && s.layout.table_bf16) RoundToBf16(absl::MakeSpan(payload.values));
  if (s.peel()) {
    payload.inserted = std::move(inserted);
    s.holds_selection = true;
  }
  return payload;
}

absl::StatusOr<Update> DeviceGroupState::Decode(const Payload& aggregate) {
  Impl& s = *impl_;
  const SketchShape& want = s.layout.shape;
  // A step-seeded sketch's seed is its step's (the compressor checks it
  // against the step).
  const bool fits = aggregate.kind == PayloadKind::kSketch && aggregate.dim == s.dim &&
                    aggregate.sketch.rows == want.rows && aggregate.sketch.cols == want.cols &&
                    (s.step_seeded() || aggregate.sketch.seed == want.seed) &&
                    aggregate.values.size() == want.num_cells();
  if (!fits) {
    return absl::InvalidArgumentError(absl::StrCat("the aggregate is not a sketch of this group's shape (", want.rows,
                                                   "x", want.cols, ", dim ", s.dim, ")"));
  }
  const size_t cells = want.num_cells();
  std::memcpy(s.host_table, aggregate.values.data(), cells * sizeof(float));
  GPU_RETURN_IF_ERROR(cudaMemcpyAsync(s.table.data(), s.host_table, cells * sizeof(float), cudaMemcpyHostToDevice,
                                      s.stream),
                      "copying the aggregate to the device");
  Update update;
  update.dim = s.dim;
  const uint32_t* indices = s.hitter_indices.data();
  const float* values = s.hitter_values.data();
  uint64_t count = s.layout.heavy_hitters;
  if (s.peel()) {
    PeelOptions options;
    options.max_entries = cells;  // as the compressor decodes on the host
    absl::StatusOr<DevicePeelResult> peeled =
        PeelDecodeOnDevice(aggregate.sketch, s.table.data(), s.dim, options, s.peel_workspace, s.stream);
    if (!peeled.ok()) return peeled.status();
    indices = peeled->indices;
    values = peeled->values;
    count = peeled->count;
  } else if (absl::Status st = LaunchSketchHeavyHitters(aggregate.sketch, s.table.data(), s.dim, count, s.workspace,
                                                        s.hitter_indices.data(), s.hitter_values.data(), s.stream);
             !st.ok()) {
    return st;  // estimate and candidates: the heavy hitters of the estimates
  }
  update.indices.resize(count);
  update.values.resize(count);
  if (count > 0) {
    GPU_RETURN_IF_ERROR(cudaMemcpyAsync(update.indices.data(), indices, count * sizeof(uint32_t),
                                        cudaMemcpyDeviceToHost, s.stream),
                        "copying the decoded coordinates to the host");
    GPU_RETURN_IF_ERROR(cudaMemcpyAsync(update.values.data(), values, count * sizeof(float), cudaMemcpyDeviceToHost,
                                        s.stream),
                        "copying the decoded values to the host");
  }
  GPU_RETURN_IF_ERROR(cudaStreamSynchronize(s.stream), "decoding a group");
  return update;
}

absl::StatusOr<DeviceStack::ReleaseNorms> DeviceGroupState::LastReleaseNorms() const {
  Impl& s = *impl_;
  if (!s.holds_selection) {
    return absl::FailedPreconditionError("a release cap needs a peel Encode's inserted coordinates");
  }
  // Only capped runs ask: the selected values come to the host then, and are
  // added in index order, as the host stack adds them.
  std::vector<float> sent(s.layout.heavy_hitters);
  GPU_RETURN_IF_ERROR(cudaMemcpyAsync(sent.data(), s.hitter_values.data(), sent.size() * sizeof(float),
                                      cudaMemcpyDeviceToHost, s.stream),
                      "copying the inserted values to the host");
  ReleaseNorms norms;
  if (s.momentum >= 0) {
    if (absl::Status st = LaunchSquaredNorm(s.velocity.data(), s.dim, s.norm.data(), s.stream); !st.ok()) return st;
    GPU_RETURN_IF_ERROR(cudaMemcpyAsync(&norms.velocity_squared, s.norm.data(), sizeof(double),
                                        cudaMemcpyDeviceToHost, s.stream),
                        "reading the velocity's norm");
  }
  GPU_RETURN_IF_ERROR(cudaStreamSynchronize(s.stream), "reading the release norms");
  for (float v : sent) norms.sent_squared += static_cast<double>(v) * v;
  return norms;
}

absl::StatusOr<std::vector<float>> DeviceGroupState::ResidualAt(absl::Span<const uint32_t> indices) const {
  Impl& s = *impl_;
  for (const uint32_t i : indices) {
    if (i >= s.dim) {
      return absl::InvalidArgumentError(absl::StrCat("coordinate ", i, " is outside the group of ", s.dim));
    }
  }
  std::vector<float> values(indices.size());
  if (indices.empty()) return values;
  if (s.gathered.size() < indices.size()) {
    absl::StatusOr<DeviceBuffer<float>> grown = DeviceBuffer<float>::Allocate(indices.size());
    if (!grown.ok()) return grown.status();
    s.gathered = *std::move(grown);
  }
  if (absl::Status st = s.UploadIndices(indices); !st.ok()) return st;
  if (absl::Status st = LaunchGather(s.residual.data(), s.dim, s.index_scratch.data(), indices.size(),
                                     s.gathered.data(), /*bad_indices=*/nullptr, s.stream);
      !st.ok()) {
    return st;
  }
  GPU_RETURN_IF_ERROR(cudaMemcpyAsync(values.data(), s.gathered.data(), values.size() * sizeof(float),
                                      cudaMemcpyDeviceToHost, s.stream),
                      "copying the residual's values to the host");
  GPU_RETURN_IF_ERROR(cudaStreamSynchronize(s.stream), "gathering the residual");
  return values;
}

absl::StatusOr<double> DeviceGroupState::VelocitySquared() const {
  Impl& s = *impl_;
  if (s.momentum < 0) return 0.0;
  double squared = 0;
  if (absl::Status st = LaunchSquaredNorm(s.velocity.data(), s.dim, s.norm.data(), s.stream); !st.ok()) return st;
  GPU_RETURN_IF_ERROR(cudaMemcpyAsync(&squared, s.norm.data(), sizeof(double), cudaMemcpyDeviceToHost, s.stream),
                      "reading the velocity's norm");
  GPU_RETURN_IF_ERROR(cudaStreamSynchronize(s.stream), "reading the velocity's norm");
  return squared;
}

absl::Status DeviceGroupState::Settle(const Coordinates& release, const Coordinates& velocity_mask,
                                      float residual_kept) {
  Impl& s = *impl_;
  if (absl::Status st = ValidateCoordinates(release, s.dim); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("release: ", st.message()));
  }
  const bool has_velocity = s.momentum >= 0;
  if (has_velocity) {
    if (absl::Status st = ValidateCoordinates(velocity_mask, s.dim); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("velocity mask: ", st.message()));
    }
  }
  if (release.all && residual_kept != 0) {
    return absl::InvalidArgumentError("a capped release names its coordinates");
  }
  const bool same = release.all == velocity_mask.all && release.indices == velocity_mask.indices;
  if (has_velocity && same) return s.Clear(release, s.residual.data(), s.velocity.data(), residual_kept);
  if (absl::Status st = s.Clear(release, s.residual.data(), nullptr, residual_kept); !st.ok()) return st;
  if (has_velocity) return s.Clear(velocity_mask, s.velocity.data(), nullptr);
  return absl::OkStatus();
}

absl::Status DeviceGroupState::ScaleResidual(float factor) {
  Impl& s = *impl_;
  if (absl::Status st = LaunchScale(s.residual.data(), s.dim, factor, s.stream); !st.ok()) return st;
  GPU_RETURN_IF_ERROR(cudaStreamSynchronize(s.stream), "rescaling a group's residual");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> DeviceGroupState::Residual() const {
  return CopyToHost(GradientView::OnDevice(impl_->residual.data(), impl_->residual.size()));
}

absl::StatusOr<std::vector<float>> DeviceGroupState::Velocity() const {
  return CopyToHost(GradientView::OnDevice(impl_->velocity.data(), impl_->velocity.size()));
}

absl::Status DeviceGroupState::Restore(absl::Span<const float> residual, absl::Span<const float> velocity) {
  Impl& s = *impl_;
  if (!residual.empty() && residual.size() != s.dim) {
    return absl::InvalidArgumentError(absl::StrCat("a residual of ", residual.size(), " values for a group of ", s.dim));
  }
  if (!velocity.empty() && velocity.size() != s.velocity.size()) {
    return absl::InvalidArgumentError(absl::StrCat("a velocity of ", velocity.size(), " values for a group keeping ",
                                                   s.velocity.size()));
  }
  auto load = [&](DeviceBuffer<float>& target, absl::Span<const float> values) -> absl::Status {
    if (values.empty()) return target.ZeroAsync(s.stream);
    GPU_RETURN_IF_ERROR(cudaMemcpyAsync(target.data(), values.data(), values.size() * sizeof(float),
                                        cudaMemcpyHostToDevice, s.stream),
                        "restoring a group's state");
    return absl::OkStatus();
  };
  if (absl::Status st = load(s.residual, residual); !st.ok()) return st;
  if (absl::Status st = load(s.velocity, velocity); !st.ok()) return st;
  GPU_RETURN_IF_ERROR(cudaStreamSynchronize(s.stream), "restoring a group's state");
  return absl::OkStatus();
}

}  // namespace sketchfuse
