#include "proto/payload_convert.h"

#include "absl/strings/str_cat.h"
#include "common/error_feedback.h"

namespace sketchfuse {

int PayloadKindToProto(PayloadKind kind) {
  switch (kind) {
    case PayloadKind::kDense: return v1::Payload::DENSE;
    case PayloadKind::kSparse: return v1::Payload::SPARSE;
    case PayloadKind::kSketch: return v1::Payload::SKETCH;
  }
  return v1::Payload::KIND_UNSPECIFIED;
}

absl::StatusOr<PayloadKind> PayloadKindFromProto(int kind) {
  switch (kind) {
    case v1::Payload::DENSE: return PayloadKind::kDense;
    case v1::Payload::SPARSE: return PayloadKind::kSparse;
    case v1::Payload::SKETCH: return PayloadKind::kSketch;
    default:
      return absl::InvalidArgumentError(absl::StrCat("payload kind ", kind, " is not DENSE, SPARSE or SKETCH"));
  }
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
    p.sketch = {message.sketch().rows(), message.sketch().cols(), message.sketch().seed()};
  }
  absl::Status valid = ValidatePayload(p);
  if (!valid.ok()) return valid;
  return p;
}

void PayloadToProto(const Payload& payload, v1::Payload* message) {
  message->Clear();
  message->set_kind(static_cast<v1::Payload::Kind>(PayloadKindToProto(payload.kind)));
  if (payload.kind == PayloadKind::kSketch) {
    message->mutable_sketch()->set_rows(payload.sketch.rows);
    message->mutable_sketch()->set_cols(payload.sketch.cols);
    message->mutable_sketch()->set_seed(payload.sketch.seed);
  }
  message->set_dim(payload.dim);
  message->mutable_indices()->Add(payload.indices.begin(), payload.indices.end());
  message->mutable_values()->Add(payload.values.begin(), payload.values.end());
}

absl::StatusOr<Update> UpdateFromProto(const v1::Update& message) {
  Update u;
  u.dense = message.dense();
  u.dim = message.dim();
  u.indices.assign(message.indices().begin(), message.indices().end());
  u.values.assign(message.values().begin(), message.values().end());
  absl::Status valid = ValidateUpdate(u, u.dim);
  if (!valid.ok()) return valid;
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
