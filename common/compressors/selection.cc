#include "common/compressors/selection.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace sketchfuse {

uint64_t SelectionSize(uint64_t dim, double density, uint64_t k) {
  const uint64_t chosen =
      k > 0 ? k : std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(density * dim)));
  return std::min(chosen, dim);
}

absl::Status CheckGroupSize(uint64_t n) {
  if (n == 0 || n > 0xFFFFFFFFull) {
    return absl::InvalidArgumentError(
        absl::StrCat("a gradient group must have 1 to 2^32 - 1 elements; got ", n));
  }
  return absl::OkStatus();
}

std::string SelectionParams::ToString() const {
  return k > 0 ? absl::StrCat("k=", k) : absl::StrCat("density=", density);
}

absl::StatusOr<SelectionParams> ReadSelection(ParamReader& params) {
  SelectionParams selection;
  const bool has_density = params.Has("density");
  const bool has_k = params.Has("k");
  if (has_density && has_k) {
    return absl::InvalidArgumentError(
        absl::StrCat(params.name(), ": set density or k, not both"));
  }
  absl::StatusOr<double> density = params.Double("density", 0.001, 1e-9, 1.0);
  if (!density.ok()) return density.status();
  absl::StatusOr<uint64_t> k = params.Uint("k", 0, 1, 0xFFFFFFFFull);
  if (!k.ok()) return k.status();
  selection.density = *density;
  selection.k = *k;
  return selection;
}

Payload GatherSparse(absl::Span<const float> grad, std::vector<uint32_t> indices) {
  Payload p;
  p.kind = PayloadKind::kSparse;
  p.dim = grad.size();
  p.values.resize(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) p.values[i] = grad[indices[i]];
  p.indices = std::move(indices);
  return p;
}

std::string Compressor::PayloadKindMismatch(PayloadKind got) const {
  return absl::StrCat(spec(), " takes ", PayloadKindName(payload_kind()), " payloads, not ",
                      PayloadKindName(got));
}

absl::Status SparseCompressor::CheckPayloadForStep(const Payload& payload, uint64_t) const {
  if (absl::Status s = CheckPayload(payload); !s.ok()) return s;
  const uint64_t most = MostEntries(payload.dim);
  if (payload.indices.size() > most) {
    return absl::InvalidArgumentError(absl::StrCat(spec(), " sends at most ", most, " entries of a group of ",
                                                   payload.dim, " elements; the payload has ", payload.indices.size()));
  }
  return absl::OkStatus();
}

absl::StatusOr<Update> SparseCompressor::Decode(const Payload& aggregate) const {
  absl::Status fits = CheckPayload(aggregate);
  if (!fits.ok()) return fits;
  Update update;
  update.dim = aggregate.dim;
  update.indices = aggregate.indices;
  update.values = aggregate.values;
  return update;
}

}  // namespace sketchfuse
