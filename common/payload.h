// What a compressor produces and what aggregation consumes.
//
// A Payload stands for one fused gradient group of `dim` elements:
//   kDense   values has dim entries (no compression).
//   kSparse  indices (strictly ascending, each < dim) with one value each.
//   kSketch  values is a Count-Sketch table of sketch.rows x sketch.cols.
//   kCandidateValues  values at the candidates of a round's first answer, in
//            that answer's order, without indices (a second-round push: the
//            receiver knows the candidates); at most dim of them.
// Dense and sketch payloads are linear: merging is an elementwise sum. Sparse
// payloads merge by union, summing values at shared indices. Candidate values
// merge elementwise (the same candidates, so the same count).
//
// An Update is what a worker applies after aggregation: either dense (dim
// values) or sparse (ascending indices with values).
#ifndef SKETCHFUSE_COMMON_PAYLOAD_H_
#define SKETCHFUSE_COMMON_PAYLOAD_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/count_sketch.h"

namespace sketchfuse {

enum class PayloadKind { kDense, kSparse, kSketch, kCandidateValues };

// "dense", "sparse", "sketch" or "candidate values".
absl::string_view PayloadKindName(PayloadKind kind);

struct Payload {
  PayloadKind kind = PayloadKind::kDense;
  uint64_t dim = 0;
  std::vector<uint32_t> indices;  // kSparse only
  std::vector<float> values;
  SketchShape sketch;  // kSketch only
  // kSketch from an encoder that inserted only some coordinates (count_sketch
  // with method=peel): those coordinates, ascending; nullopt when the sketch
  // holds every coordinate of the group. Kept by the worker that encoded the
  // payload to settle its residual (worker/compression/settlement.h SettleSent);
  // never on the wire.
  std::optional<std::vector<uint32_t>> inserted;

  // Bytes this payload occupies on the wire: 4 per value and per index.
  uint64_t WireBytes() const;
};

// OK if `p` satisfies the invariants of its kind; otherwise INVALID_ARGUMENT
// naming the field at fault (e.g. "indices[3] = 7 is not above indices[2] = 7").
// O(size of the payload).
absl::Status ValidatePayload(const Payload& p);

// acc += other. FAILED_PRECONDITION when kind, dim or sketch shape differ;
// `acc` is unchanged then. Both payloads must be valid.
absl::Status MergeInto(const Payload& other, Payload* acc);

// The update decoded from an aggregate.
struct Update {
  bool dense = false;
  uint64_t dim = 0;
  std::vector<uint32_t> indices;  // sparse: ascending; dense: empty
  std::vector<float> values;      // sparse: one per index; dense: dim values
};

// Position of the first NaN or infinity in x, if any.
std::optional<size_t> FirstNonFinite(absl::Span<const float> x);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_PAYLOAD_H_
