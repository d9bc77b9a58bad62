#include "proto/payload_convert.h"

#include "absl/strings/str_cat.h"
#include "common/error_feedback.h"

namespace sketchfuse {

absl::StatusOr<Payload> PayloadFromProto(const v1::Payload& message) {
  Payload p;
  switch (message.kind()) {
    case v1::Payload::DENSE: p.kind = PayloadKind::kDense; break;
    case v1::Payload::SPARSE: p.kind = PayloadKind::kSparse; break;
    case v1::Payload::SKETCH: p.kind = PayloadKind::kSketch; break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("payload kind ", static_cast<int>(message.kind()), " is not DENSE, SPARSE or SKETCH"));
  }
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
  switch (payload.kind) {
    case PayloadKind::kDense: message->set_kind(v1::Payload::DENSE); break;
    case PayloadKind::kSparse: message->set_kind(v1::Payload::SPARSE); break;
    case PayloadKind::kSketch:
      message->set_kind(v1::Payload::SKETCH);
      message->mutable_sketch()->set_rows(payload.sketch.rows);
      message->mutable_sketch()->set_cols(payload.sketch.cols);
      message->mutable_sketch()->set_seed(payload.sketch.seed);
      break;
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
