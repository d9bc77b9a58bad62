// Conversion between the wire messages of proto/payload.proto and the plain
// C++ types of common/payload.h. Incoming messages are validated on the way in
// (ValidatePayload), so nothing malformed reaches aggregation.
#ifndef SKETCHFUSE_PROTO_PAYLOAD_CONVERT_H_
#define SKETCHFUSE_PROTO_PAYLOAD_CONVERT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/payload.h"
#include "proto/payload.pb.h"

namespace sketchfuse {

// The wire value of `kind` (v1.Payload.Kind).
int PayloadKindToProto(PayloadKind kind);
// The kind of wire value `kind`; INVALID_ARGUMENT "payload kind N is not
// DENSE, SPARSE or SKETCH" for any other value.
absl::StatusOr<PayloadKind> PayloadKindFromProto(int kind);

// The wire form of `shape`, stamped with this build's kSketchHashFamily.
void SketchShapeToProto(const SketchShape& shape, v1::SketchShape* message);
// The shape a message declares. INVALID_ARGUMENT for rows or cols out of
// range (ValidateSketchShape), then FAILED_PRECONDITION (CheckSketchHashFamily)
// for a sketch hashed by another family.
absl::StatusOr<SketchShape> SketchShapeFromProto(const v1::SketchShape& message);

// Index gaps (payload.proto's index_gaps): the first index, then each index
// minus the one before. Every index list SketchFuse sends strictly ascends,
// so its senders write gaps; a list that does not ascend goes as plain
// indices, for the receiver to refuse by name. Receivers take either.

// True if `indices` is not empty and strictly ascends.
bool SendsAsGaps(const std::vector<uint32_t>& indices);
// Replaces the empty `*indices` with the indices whose gaps are `gaps`.
// INVALID_ARGUMENT naming `what` for a gap of 0 after the first (the indices
// would not ascend), a running sum past 2^32 - 1, or `*indices` not empty (a
// message that gives both indices and index_gaps).
// The same, in place: `gaps` becomes the indices (no second vector). On an
// error `gaps` is left cleared.
absl::Status GapsToIndicesInPlace(std::vector<uint32_t>* gaps, absl::string_view what);

absl::Status IndicesFromGaps(absl::Span<const uint32_t> gaps, absl::string_view what,
                             std::vector<uint32_t>* indices);

// bfloat16 values (payload.proto's bf16_values): a sketch payload's
// senders write them (common/bf16.h Bf16Bytes) when bfloat16 holds every
// cell exactly (a table count_sketch rounded: table=bf16), else float32;
// other payloads always go as float32, so their bytes never depend on their
// values. Receivers take either, for any kind.

// True if `payload` goes as bf16_values.
bool SendsAsBf16(const Payload& payload);

// Replaces the empty `*values` with the floats of bf16_values `bytes`.
// INVALID_ARGUMENT naming `what` for an odd length or `*values` not empty (a
// message that gives both values and bf16_values).
absl::Status ValuesFromBf16(absl::string_view bytes, absl::string_view what, std::vector<float>* values);

// INVALID_ARGUMENT naming the problem for an unspecified kind or a payload
// that breaks its kind's invariants; FAILED_PRECONDITION for a sketch of
// another hash family.
absl::StatusOr<Payload> PayloadFromProto(const v1::Payload& message);
void PayloadToProto(const Payload& payload, v1::Payload* message);

// INVALID_ARGUMENT for an update that does not fit its own dim.
absl::StatusOr<Update> UpdateFromProto(const v1::Update& message);
// The same for a shard's answer, which may also be a candidate list
// (common/error_feedback.h ValidateAnswer).
absl::StatusOr<Update> AnswerFromProto(const v1::Update& message);
void UpdateToProto(const Update& update, v1::Update* message);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_PROTO_PAYLOAD_CONVERT_H_
