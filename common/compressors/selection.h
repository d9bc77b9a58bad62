// Pieces shared by the compressors that select k coordinates.
#ifndef SKETCHFUSE_COMMON_COMPRESSORS_SELECTION_H_
#define SKETCHFUSE_COMMON_COMPRESSORS_SELECTION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/compressor.h"
#include "common/compressor_params.h"

namespace sketchfuse {

// How many coordinates to keep: a density in (0, 1] or an absolute k (not both).
struct SelectionParams {
  double density = 0.001;
  uint64_t k = 0;  // 0: use density

  uint64_t For(uint64_t dim) const { return SelectionSize(dim, density, k); }
  // "density=..." or "k=..." for specs.
  std::string ToString() const;
};

// Reads `density` (default 0.001, in (0, 1]) or `k` (>= 1); INVALID_ARGUMENT
// when both are set.
absl::StatusOr<SelectionParams> ReadSelection(ParamReader& params);

// A sparse payload with grad's values at `indices` (ascending).
Payload GatherSparse(absl::Span<const float> grad, std::vector<uint32_t> indices);

// Base of the compressors whose payloads are sparse: their decode returns the
// (merged) entries as they are.
class SparseCompressor : public Compressor {
 public:
  PayloadKind payload_kind() const override { return PayloadKind::kSparse; }
  absl::StatusOr<Update> Decode(const Payload& aggregate) const override;
  // One worker's payload: the kind, and at most MostEntries(dim) entries, as
  // many as this compressor's Encode sends (a payload of every coordinate
  // would make the union answered to every worker larger than dense's).
  absl::Status CheckPayloadForStep(const Payload& payload, uint64_t step) const override;

 protected:
  // The most entries Encode puts in a payload of a group of `dim` elements.
  virtual uint64_t MostEntries(uint64_t dim) const = 0;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_COMPRESSORS_SELECTION_H_
