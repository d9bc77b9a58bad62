#include "proto/payload_convert.h"

#include "absl/strings/str_cat.h"
#include "common/error_feedback.h"

namespace sketchfuse {

int PayloadKindToProto(PayloadKind kind) {
  switch (kind) {
    case PayloadKind::kDense: return v1::Payload::DENSE;
    case PayloadKind::kSparse: return v1::Payload::SPARSE;
    case PayloadKind::kSketch: return v1::Payload::SKETCH;
    case PayloadKind::kCandidateValues: return v1::Payload::CANDIDATE_VALUES;
  }
  return v1::Payload::KIND_UNSPECIFIED;
}

absl::StatusOr<PayloadKind> PayloadKindFromProto(int kind) {
  switch (kind) {
    case v1::Payload::DENSE: return PayloadKind::kDense;
    case v1::Payload::SPARSE: return PayloadKind::kSparse;
    case v1::Payload::SKETCH: return PayloadKind::kSketch;
    case v1::Payload::CANDIDATE_VALUES: return PayloadKind::kCandidateValues;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("payload kind ", kind, " is not DENSE, SPARSE, SKETCH or CANDIDATE_VALUES"));
  }
}

void SketchShapeToProto(const SketchShape& shape, v1::SketchShape* message) {
  message->set_rows(shape.rows);
  message->set_cols(shape.cols);
  message->set_seed(shape.seed);
  message->set_hash_family(kSketchHashFamily);
}

absl::StatusOr<SketchShape> SketchShapeFromProto(const v1::SketchShape& message) {
  const SketchShape shape{message.rows(), message.cols(), message.seed()};
  if (absl::Status valid = ValidateSketchShape(shape); !valid.ok()) return valid;
  if (absl::Status family = CheckSketchHashFamily(message.hash_family(), "the sketch payload");
      !family.ok()) {
    return family;
  }
  return shape;
}

absl::StatusOr<Payload> PayloadFromProto(const v1::Payload& message) {
  Payload p;
  absl::StatusOr<PayloadKind> kind = PayloadKindFromProto(message.kind());
  if (!kind.ok()) return kind.status();
  p.kind = *kind;
  p.dim = message.dim();
  p.indices.assign(message.indices().begin(), message.indices().end());
  p.values.assign(message.values().begin(), message.values().end());
  if (p.kind == PayloadKind::kSketch) {
    absl::StatusOr<SketchShape> shape = SketchShapeFromProto(message.sketch());
    if (!shape.ok()) return shape.status();
    p.sketch = *shape;
  }
  absl::Status valid = ValidatePayload(p);
  if (!valid.ok()) return valid;
  return p;
}

void PayloadToProto(const Payload& payload, v1::Payload* message) {
  message->Clear();
  message->set_kind(static_cast<v1::Payload::Kind>(PayloadKindToProto(payload.kind)));
  if (payload.kind == PayloadKind::kSketch) SketchShapeToProto(payload.sketch, message->mutable_sketch());
  message->set_dim(payload.dim);
  message->mutable_indices()->Add(payload.indices.begin(), payload.indices.end());
  message->mutable_values()->Add(payload.values.begin(), payload.values.end());
}

namespace {

Update UpdateFields(const v1::Update& message) {
  Update u;
  u.dense = message.dense();
  u.dim = message.dim();
  u.indices.assign(message.indices().begin(), message.indices().end());
  u.values.assign(message.values().begin(), message.values().end());
  return u;
}

}  // namespace

absl::StatusOr<Update> UpdateFromProto(const v1::Update& message) {
  Update u = UpdateFields(message);
  if (absl::Status valid = ValidateUpdate(u, u.dim); !valid.ok()) return valid;
  return u;
}

absl::StatusOr<Update> AnswerFromProto(const v1::Update& message) {
  Update u = UpdateFields(message);
  if (absl::Status valid = ValidateAnswer(u, u.dim); !valid.ok()) return valid;
  return u;
}

void UpdateToProto(const Update& update, v1::Update* message) {
  message->Clear();
  message->set_dense(update.dense);
  message->set_dim(update.dim);
  message->mutable_indices()->Add(update.indices.begin(), update.indices.end());
  message->mutable_values()->Add(update.values.begin(), update.values.end());
}

}  // namespace sketchfuse
