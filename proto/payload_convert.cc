#include "proto/payload_convert.h"

#include "absl/strings/str_cat.h"
#include "common/bf16.h"
#include "common/error_feedback.h"

namespace sketchfuse {

bool SendsAsGaps(const std::vector<uint32_t>& indices) {
  if (indices.empty()) return false;
  for (size_t i = 1; i < indices.size(); ++i) {
    if (indices[i] <= indices[i - 1]) return false;
  }
  return true;
}

absl::Status IndicesFromGaps(absl::Span<const uint32_t> gaps, absl::string_view what,
                             std::vector<uint32_t>* indices) {
  if (gaps.empty()) return absl::OkStatus();
  if (!indices->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " gives both indices and index_gaps (", indices->size(), " and ", gaps.size(), ")"));
  }
  indices->reserve(gaps.size());
  uint64_t index = 0;
  for (size_t i = 0; i < gaps.size(); ++i) {
    if (i > 0 && gaps[i] == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " index_gaps[", i, "] = 0: every gap after the first is at least 1 (indices ascend)"));
    }
    index += gaps[i];
    if (index > UINT32_MAX) {
      indices->clear();
      return absl::InvalidArgumentError(
          absl::StrCat(what, " index_gaps[", i, "] takes the index to ", index, ", past 2^32 - 1"));
    }
    indices->push_back(static_cast<uint32_t>(index));
  }
  return absl::OkStatus();
}

absl::Status GapsToIndicesInPlace(std::vector<uint32_t>* gaps, absl::string_view what) {
  uint64_t index = 0;
  for (size_t i = 0; i < gaps->size(); ++i) {
    const uint32_t gap = (*gaps)[i];
    if (i > 0 && gap == 0) {
      gaps->clear();
      return absl::InvalidArgumentError(
          absl::StrCat(what, " index_gaps[", i, "] = 0: every gap after the first is at least 1 (indices ascend)"));
    }
    index += gap;
    if (index > UINT32_MAX) {
      gaps->clear();
      return absl::InvalidArgumentError(
          absl::StrCat(what, " index_gaps[", i, "] takes the index to ", index, ", past 2^32 - 1"));
    }
    (*gaps)[i] = static_cast<uint32_t>(index);
  }
  return absl::OkStatus();
}

bool SendsAsBf16(const Payload& payload) {
  return payload.kind == PayloadKind::kSketch && HoldsExactlyAsBf16(payload.values);
}

absl::Status ValuesFromBf16(absl::string_view bytes, absl::string_view what, std::vector<float>* values) {
  if (bytes.empty()) return absl::OkStatus();
  if (!values->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " gives both values and bf16_values (", values->size(),
                                                   " values and ", bytes.size(), " bytes)"));
  }
  if (bytes.size() % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " bf16_values has ", bytes.size(), " bytes, not two a value"));
  }
  values->resize(bytes.size() / 2);
  for (size_t i = 0; i < values->size(); ++i) (*values)[i] = Bf16ValueAt(bytes, i);
  return absl::OkStatus();
}

namespace {

// Writes `indices` into `message` as gaps where they ascend, else as they are.
template <typename Message>
void PutIndices(const std::vector<uint32_t>& indices, Message* message) {
  if (!SendsAsGaps(indices)) {
    message->mutable_indices()->Add(indices.begin(), indices.end());
    return;
  }
  message->mutable_index_gaps()->Reserve(static_cast<int>(indices.size()));
  uint32_t previous = 0;
  for (uint32_t index : indices) {
    message->add_index_gaps(index - previous);
    previous = index;
  }
}

// Reads a message's indices, from either field.
template <typename Message>
absl::Status GetIndices(const Message& message, absl::string_view what, std::vector<uint32_t>* indices) {
  indices->assign(message.indices().begin(), message.indices().end());
  return IndicesFromGaps(absl::MakeConstSpan(message.index_gaps().data(), message.index_gaps().size()), what,
                         indices);
}

}  // namespace

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
  if (absl::Status indices = GetIndices(message, "payload", &p.indices); !indices.ok()) return indices;
  p.values.assign(message.values().begin(), message.values().end());
  if (absl::Status values = ValuesFromBf16(message.bf16_values(), "payload", &p.values); !values.ok()) return values;
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
  PutIndices(payload.indices, message);
  if (SendsAsBf16(payload)) {
    message->set_bf16_values(Bf16Bytes(payload.values));
  } else {
    message->mutable_values()->Add(payload.values.begin(), payload.values.end());
  }
}

namespace {

absl::StatusOr<Update> UpdateFields(const v1::Update& message) {
  Update u;
  u.dense = message.dense();
  u.dim = message.dim();
  if (absl::Status indices = GetIndices(message, "update", &u.indices); !indices.ok()) return indices;
  u.values.assign(message.values().begin(), message.values().end());
  return u;
}

}  // namespace

absl::StatusOr<Update> UpdateFromProto(const v1::Update& message) {
  absl::StatusOr<Update> u = UpdateFields(message);
  if (!u.ok()) return u.status();
  if (absl::Status valid = ValidateUpdate(*u, u->dim); !valid.ok()) return valid;
  return u;
}

absl::StatusOr<Update> AnswerFromProto(const v1::Update& message) {
  absl::StatusOr<Update> u = UpdateFields(message);
  if (!u.ok()) return u.status();
  if (absl::Status valid = ValidateAnswer(*u, u->dim); !valid.ok()) return valid;
  return u;
}

void UpdateToProto(const Update& update, v1::Update* message) {
  message->Clear();
  message->set_dense(update.dense);
  message->set_dim(update.dim);
  PutIndices(update.indices, message);
  message->mutable_values()->Add(update.values.begin(), update.values.end());
}

}  // namespace sketchfuse
