#include "common/payload.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace sketchfuse {

absl::string_view PayloadKindName(PayloadKind kind) {
  switch (kind) {
    case PayloadKind::kDense: return "dense";
    case PayloadKind::kSparse: return "sparse";
    case PayloadKind::kSketch: return "sketch";
    case PayloadKind::kCandidateValues: return "candidate values";
  }
  return "unknown";
}

uint64_t Payload::WireBytes() const {
  return 4 * static_cast<uint64_t>(values.size()) + 4 * static_cast<uint64_t>(indices.size());
}

absl::Status ValidatePayload(const Payload& p) {
  if (p.dim == 0 || p.dim > 0xFFFFFFFFull) {
    return absl::InvalidArgumentError(
        absl::StrCat("payload dim must be in [1, 2^32 - 1]; got ", p.dim));
  }
  switch (p.kind) {
    case PayloadKind::kDense:
      if (!p.indices.empty()) {
        return absl::InvalidArgumentError("dense payload must carry no indices");
      }
      if (p.values.size() != p.dim) {
        return absl::InvalidArgumentError(absl::StrCat(
            "dense payload has ", p.values.size(), " values; dim is ", p.dim));
      }
      return absl::OkStatus();
    case PayloadKind::kSparse:
      if (p.indices.size() != p.values.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sparse payload has ", p.indices.size(), " indices but ", p.values.size(), " values"));
      }
      for (size_t i = 0; i < p.indices.size(); ++i) {
        if (p.indices[i] >= p.dim) {
          return absl::InvalidArgumentError(absl::StrCat(
              "indices[", i, "] = ", p.indices[i], " is out of range for dim ", p.dim));
        }
        if (i > 0 && p.indices[i] <= p.indices[i - 1]) {
          return absl::InvalidArgumentError(absl::StrCat(
              "indices[", i, "] = ", p.indices[i], " is not above indices[", i - 1,
              "] = ", p.indices[i - 1]));
        }
      }
      return absl::OkStatus();
    case PayloadKind::kSketch: {
      absl::Status shape = ValidateSketchShape(p.sketch);
      if (!shape.ok()) return shape;
      if (!p.indices.empty()) {
        return absl::InvalidArgumentError("sketch payload must carry no indices");
      }
      if (p.values.size() != p.sketch.num_cells()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sketch payload has ", p.values.size(), " values; ", p.sketch.rows, "x",
            p.sketch.cols, " needs ", p.sketch.num_cells()));
      }
      return absl::OkStatus();
    }
    case PayloadKind::kCandidateValues:
      if (!p.indices.empty()) {
        return absl::InvalidArgumentError("candidate values must carry no indices");
      }
      if (p.values.empty() || p.values.size() > p.dim) {
        return absl::InvalidArgumentError(absl::StrCat("candidate values: ", p.values.size(),
                                                       " values; a group of dim ", p.dim, " has 1 to ", p.dim,
                                                       " candidates"));
      }
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError("unknown payload kind");
}

absl::Status MergeInto(const Payload& other, Payload* acc) {
  if (other.kind != acc->kind || other.dim != acc->dim) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot merge a ", PayloadKindName(other.kind), " payload of dim ", other.dim,
        " into a ", PayloadKindName(acc->kind), " payload of dim ", acc->dim));
  }
  switch (acc->kind) {
    case PayloadKind::kSketch:
      if (other.sketch != acc->sketch) {
        return absl::FailedPreconditionError(absl::StrCat(
            "cannot merge sketches of different shapes: ", other.sketch.rows, "x",
            other.sketch.cols, " seed ", other.sketch.seed, " into ", acc->sketch.rows, "x",
            acc->sketch.cols, " seed ", acc->sketch.seed));
      }
      [[fallthrough]];
    case PayloadKind::kCandidateValues:
      if (other.values.size() != acc->values.size()) {
        return absl::FailedPreconditionError(absl::StrCat("cannot merge ", other.values.size(),
                                                          " candidate values into ", acc->values.size()));
      }
      [[fallthrough]];
    case PayloadKind::kDense:
      AddInPlace(absl::MakeSpan(acc->values), other.values);
      return absl::OkStatus();
    case PayloadKind::kSparse: {
      // Union of two ascending index lists.
      std::vector<uint32_t> indices;
      std::vector<float> values;
      indices.reserve(acc->indices.size() + other.indices.size());
      values.reserve(indices.capacity());
      size_t i = 0, j = 0;
      while (i < acc->indices.size() || j < other.indices.size()) {
        if (j == other.indices.size() ||
            (i < acc->indices.size() && acc->indices[i] < other.indices[j])) {
          indices.push_back(acc->indices[i]);
          values.push_back(acc->values[i++]);
        } else if (i == acc->indices.size() || other.indices[j] < acc->indices[i]) {
          indices.push_back(other.indices[j]);
          values.push_back(other.values[j++]);
        } else {
          indices.push_back(acc->indices[i]);
          values.push_back(acc->values[i++] + other.values[j++]);
        }
      }
      acc->indices = std::move(indices);
      acc->values = std::move(values);
      return absl::OkStatus();
    }
  }
  return absl::FailedPreconditionError("unknown payload kind");
}

std::optional<size_t> FirstNonFinite(absl::Span<const float> x) {
  // A vectorizable scan for the common all-finite case, then a search.
  bool all_finite = true;
  for (float v : x) all_finite &= std::abs(v) <= 3.402823466e38f;
  if (all_finite) return std::nullopt;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) return i;
  }
  return std::nullopt;
}

}  // namespace sketchfuse
