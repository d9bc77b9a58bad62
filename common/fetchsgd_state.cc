#include "common/fetchsgd_state.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/sketch_hash.h"

namespace sketchfuse {

absl::StatusOr<FetchSgdState> FetchSgdState::Create(const SketchShape& shape, uint64_t dim, uint64_t k,
                                                    float momentum) {
  if (absl::Status s = ValidateSketchShape(shape); !s.ok()) return s;
  if (dim == 0 || dim > 0xFFFFFFFFull) {
    return absl::InvalidArgumentError(absl::StrCat("FetchSGD state: a group of ", dim, " elements"));
  }
  if (k == 0) return absl::InvalidArgumentError("FetchSGD state: k must be at least 1");
  if (!(momentum >= 0.0f && momentum < 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("FetchSGD state: momentum must be in [0, 1); got ", momentum));
  }
  return FetchSgdState(shape, dim, k, momentum);
}

absl::StatusOr<Update> FetchSgdState::Step(const Payload& sum) {
  if (sum.kind != PayloadKind::kSketch || sum.dim != dim_ || sum.sketch != shape_ ||
      sum.values.size() != u_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("FetchSGD state of a group of ", dim_, " elements sketched ",
                                                   shape_.rows, "x", shape_.cols, " seed ", shape_.seed,
                                                   " cannot take a ", PayloadKindName(sum.kind), " payload of ",
                                                   sum.dim, " elements (", sum.sketch.rows, "x", sum.sketch.cols,
                                                   " seed ", sum.sketch.seed, ")"));
  }
  const float rho = momentum_;
  // A sum of finite sketches can still take the state past float's range
  // (a worker sending cells near FLT_MAX step after step): refused before
  // anything is written, so the state stays finite, as Restore needs it.
  for (size_t c = 0; c < u_.size(); ++c) {
    const float u = rho * u_[c] + sum.values[c];
    const float e = e_[c] + u;
    if (!std::isfinite(u) || !std::isfinite(e)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "FetchSGD state of a group of ", dim_, " elements: the step's sum (cell ", c, ": ", sum.values[c],
          ") would take its ", std::isfinite(u) ? "error" : "momentum", " sketch past float's range; step refused"));
    }
  }
  for (size_t c = 0; c < u_.size(); ++c) {
    u_[c] = rho * u_[c] + sum.values[c];
    e_[c] += u_[c];
  }
  const SparseEntries hh = SketchView(shape_, e_.data()).HeavyHitters(dim_, k_);
  const uint32_t chunk_shift = ChunkShift(shape_.cols);
  for (uint32_t r = 0; r < shape_.rows; ++r) {
    const RowHash hash = MakeRowHash(shape_.seed, r);
    const size_t row = static_cast<size_t>(r) * shape_.cols;
    for (uint32_t i : hh.indices) {
      const size_t cell = row + BucketOfIndex(hash, i, shape_.cols, chunk_shift);
      u_[cell] = 0.0f;
      e_[cell] = 0.0f;
    }
  }
  Update update;
  update.dim = dim_;
  update.indices = hh.indices;
  update.values = hh.values;
  return update;
}

std::vector<float> FetchSgdState::Save() const {
  std::vector<float> saved(u_);
  saved.insert(saved.end(), e_.begin(), e_.end());
  return saved;
}

absl::Status FetchSgdState::Restore(absl::Span<const float> saved) {
  if (saved.size() != 2 * u_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("a FetchSGD state of ", saved.size(), " values for a ",
                                                   shape_.rows, "x", shape_.cols, " sketch, which needs ",
                                                   2 * u_.size()));
  }
  for (size_t i = 0; i < saved.size(); ++i) {
    if (!std::isfinite(saved[i])) {
      return absl::InvalidArgumentError(absl::StrCat("a FetchSGD state with a non-finite value at ", i));
    }
  }
  u_.assign(saved.begin(), saved.begin() + u_.size());
  e_.assign(saved.begin() + u_.size(), saved.end());
  return absl::OkStatus();
}

}  // namespace sketchfuse
