// Conversion between the wire messages of proto/payload.proto and the plain
// C++ types of common/payload.h. Incoming messages are validated on the way in
// (ValidatePayload), so nothing malformed reaches aggregation.
#ifndef SKETCHFUSE_PROTO_PAYLOAD_CONVERT_H_
#define SKETCHFUSE_PROTO_PAYLOAD_CONVERT_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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
