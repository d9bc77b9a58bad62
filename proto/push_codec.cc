#include "proto/push_codec.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/bf16.h"
#include "common/count_sketch.h"
#include "common/error_feedback.h"
#include "common/status_macros.h"
#include "proto/payload_convert.h"
#include "proto/wire_format.h"

namespace sketchfuse {
namespace {

// Field numbers, from aggregator.proto and payload.proto.
constexpr uint32_t kRequestRound = 1, kRequestWorker = 2, kRequestPayload = 3;
constexpr uint32_t kReplyUpdate = 1, kReplyContributors = 2, kReplyHashFamily = 3;
constexpr uint32_t kPayloadKind = 1, kPayloadDim = 2, kPayloadIndices = 3, kPayloadValues = 4, kPayloadSketch = 5,
                   kPayloadIndexGaps = 6, kPayloadBf16Values = 7;
constexpr uint32_t kUpdateDense = 1, kUpdateDim = 2, kUpdateIndices = 3, kUpdateValues = 4, kUpdateIndexGaps = 5;

using wire::Field;
using wire::MessageParser;
using wire::SliceReader;

// The fields a Payload is read from before it is assembled.
struct PayloadFields {
  int64_t kind = 0;
  Payload payload;  // dim, indices, values
  std::vector<uint32_t> index_gaps;
  std::vector<float> bf16_values;  // decoded (bf16_values' last occurrence)
  bool has_bf16_values = false;
  v1::SketchShape shape;
};

// Writes ascending `indices` as gaps (payload_convert.h SendsAsGaps), any
// others as they are.
void PutIndices(uint32_t indices_field, uint32_t gaps_field, const std::vector<uint32_t>& indices,
                std::string* out) {
  if (SendsAsGaps(indices)) {
    wire::PutPackedIndexGaps(gaps_field, indices, out);
  } else {
    wire::PutPackedIndices(indices_field, indices, out);
  }
}

// Adds the float values of the payload submessage that ends at `end` to
// *floats (packed or not), without decoding them.
absl::Status CountFloatValues(SliceReader* r, size_t end, size_t* floats) {
  MessageParser m(r, end, "PushRequest.payload");
  return m.Parse([&](const Field& f) -> absl::Status {
    if (f.number == kPayloadValues && f.type == wire::kFixed32) {
      ++*floats;
      return wire::SkipThisField();
    }
    if (f.number == kPayloadValues && f.type == wire::kLengthDelimited) {
      size_t field_end = 0;
      RETURN_IF_ERROR(m.Submessage(f, "values", &field_end));
      const size_t length = field_end - r->position();
      *floats += length / sizeof(float);
      r->Skip(length);
      return absl::OkStatus();
    }
    return wire::SkipThisField();
  });
}

// How many float values a request's payload carries, in every occurrence of
// the payload field (protobuf merges them), read ahead without decoding
// them: what licenses its indices (a sparse payload's values are floats; a
// bf16_values field is a sketch's, and carries none). 0 for a malformed
// request, which then licenses no index: the parse refuses it, naming the
// problem (or the first index past that bound).
size_t FloatValuesInRequest(const grpc::ByteBuffer& buffer) {
  SliceReader r(buffer);
  size_t floats = 0;
  MessageParser request(&r, r.size(), "PushRequest");
  const absl::Status scanned = request.Parse([&](const Field& f) -> absl::Status {
    if (f.number != kRequestPayload) return wire::SkipThisField();
    size_t end = 0;
    RETURN_IF_ERROR(request.Submessage(f, "payload", &end));
    return CountFloatValues(&r, end, &floats);
  });
  return scanned.ok() ? floats : 0;
}

absl::Status ParsePayload(SliceReader* r, size_t end, size_t values_present, PayloadFields* out) {
  // Indices come with one float value each (a sparse payload; the other
  // kinds carry none): a payload holds at most as many indices as float
  // values, plain and as gaps together, refused while decoding past that.
  // So decoding them (4 bytes each) takes at most as much memory as their
  // values' own bytes, and a payload of index gaps without values none.
  const size_t most_indices = values_present;
  auto room = [&](const std::vector<uint32_t>& other) { return most_indices - std::min(most_indices, other.size()); };
  constexpr absl::string_view kWhy = "one per value it carries";
  MessageParser m(r, end, "PushRequest.payload");
  return m.Parse([&](const Field& f) -> absl::Status {
    switch (f.number) {
      case kPayloadKind: {
        uint64_t v = 0;
        RETURN_IF_ERROR(m.Varint(f, "kind", &v));
        out->kind = static_cast<int32_t>(v);  // an enum is an int32 on the wire
        return absl::OkStatus();
      }
      case kPayloadDim:
        return m.Varint(f, "dim", &out->payload.dim);
      case kPayloadIndices:
        return m.Indices(f, "indices", &out->payload.indices, room(out->index_gaps), kWhy);
      case kPayloadIndexGaps:
        return m.Indices(f, "index_gaps", &out->index_gaps, room(out->payload.indices), kWhy);
      case kPayloadBf16Values:  // a bytes field given twice: the last one, as protobuf reads it
        out->has_bf16_values = true;
        return m.Bf16Floats(f, "payload bf16_values", &out->bf16_values);
      case kPayloadValues:
        return m.Floats(f, "values", &out->payload.values);
      case kPayloadSketch: {
        std::string bytes;
        RETURN_IF_ERROR(m.Bytes(f, "sketch", &bytes));
        if (!out->shape.MergeFromString(bytes)) return m.Error("sketch is not a SketchShape");
        return absl::OkStatus();
      }
      default:
        return wire::SkipThisField();
    }
  });
}

absl::Status ParseUpdate(SliceReader* r, size_t end, uint64_t group_dim, Update* out,
                         std::vector<uint32_t>* index_gaps) {
  // An update's (or a candidate list's) indices ascend within the group, so
  // it holds at most group_dim of them: refused while decoding past that.
  const size_t most_indices = static_cast<size_t>(std::min<uint64_t>(group_dim, SIZE_MAX));
  auto room = [&](const std::vector<uint32_t>& other) { return most_indices - std::min(most_indices, other.size()); };
  constexpr absl::string_view kWhy = "one per element of the group";
  MessageParser m(r, end, "PushReply.update");
  return m.Parse([&](const Field& f) -> absl::Status {
    switch (f.number) {
      case kUpdateDense: {
        uint64_t v = 0;
        RETURN_IF_ERROR(m.Varint(f, "dense", &v));
        out->dense = v != 0;
        return absl::OkStatus();
      }
      case kUpdateDim:
        return m.Varint(f, "dim", &out->dim);
      case kUpdateIndices:
        return m.Indices(f, "indices", &out->indices, room(*index_gaps), kWhy);
      case kUpdateIndexGaps:
        return m.Indices(f, "index_gaps", index_gaps, room(out->indices), kWhy);
      case kUpdateValues:
        return m.Floats(f, "values", &out->values);
      default:
        return wire::SkipThisField();
    }
  });
}

// `gaps` as the indices, converted in place and moved into `indices`
// (which must then be empty: a message gives one or the other).
absl::Status MoveGapsToIndices(std::vector<uint32_t>* gaps, absl::string_view what, std::vector<uint32_t>* indices) {
  if (gaps->empty()) return absl::OkStatus();
  if (!indices->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " gives both indices and index_gaps (", indices->size(), " and ", gaps->size(), ")"));
  }
  RETURN_IF_ERROR(GapsToIndicesInPlace(gaps, what));
  *indices = std::move(*gaps);
  return absl::OkStatus();
}

}  // namespace

grpc::ByteBuffer EncodePushRequest(const v1::RoundKey& round, uint32_t worker,
                                   std::shared_ptr<const Payload> payload) {
  std::string fields;  // the payload's fields before its values' bytes
  wire::PutVarintField(kPayloadKind, PayloadKindToProto(payload->kind), &fields);
  wire::PutVarintField(kPayloadDim, payload->dim, &fields);
  if (payload->kind == PayloadKind::kSketch) {
    v1::SketchShape shape;
    SketchShapeToProto(payload->sketch, &shape);
    wire::PutBytesField(kPayloadSketch, shape.SerializeAsString(), &fields);
  }
  PutIndices(kPayloadIndices, kPayloadIndexGaps, payload->indices, &fields);
  // A sketch whose cells bfloat16 holds exactly goes at 2 bytes a cell,
  // copied into the header; other values at 4, referenced where they lie.
  static const std::vector<float>* const kNoValues = new std::vector<float>();
  const bool bf16 = SendsAsBf16(*payload);
  if (bf16) wire::PutBytesField(kPayloadBf16Values, Bf16Bytes(payload->values), &fields);
  const std::vector<float>& values = bf16 ? *kNoValues : payload->values;
  wire::PutValuesHeader(kPayloadValues, values, &fields);

  std::string header;
  wire::PutBytesField(kRequestRound, round.SerializeAsString(), &header);
  wire::PutVarintField(kRequestWorker, worker, &header);
  wire::PutSubmessageBeforeValues(kRequestPayload, fields, values, &header);
  return wire::HeaderThenValues(std::move(header), values, std::move(payload));
}

absl::StatusOr<PushRequestParts> DecodePushRequest(const grpc::ByteBuffer& buffer) {
  const size_t values_present = FloatValuesInRequest(buffer);
  SliceReader r(buffer);
  PushRequestParts parts;
  PayloadFields payload;
  MessageParser m(&r, r.size(), "PushRequest");
  RETURN_IF_ERROR(m.Parse([&](const Field& f) -> absl::Status {
    switch (f.number) {
      case kRequestRound: {
        std::string bytes;
        RETURN_IF_ERROR(m.Bytes(f, "round", &bytes));
        if (!parts.round.MergeFromString(bytes)) return m.Error("round is not a RoundKey");
        return absl::OkStatus();
      }
      case kRequestWorker:
        return m.Uint32(f, "worker", &parts.worker);
      case kRequestPayload: {
        size_t end = 0;
        RETURN_IF_ERROR(m.Submessage(f, "payload", &end));
        return ParsePayload(&r, end, values_present, &payload);
      }
      default:
        return wire::SkipThisField();
    }
  }));
  absl::StatusOr<PayloadKind> kind = PayloadKindFromProto(payload.kind);
  if (!kind.ok()) return absl::InvalidArgumentError(absl::StrCat("payload: ", kind.status().message()));
  parts.payload = std::move(payload.payload);
  RETURN_IF_ERROR(MoveGapsToIndices(&payload.index_gaps, "payload", &parts.payload.indices));
  if (payload.has_bf16_values && !payload.bf16_values.empty()) {
    if (!parts.payload.values.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("payload gives both values and bf16_values (",
                                                     parts.payload.values.size(), " values and ",
                                                     2 * payload.bf16_values.size(), " bytes)"));
    }
    parts.payload.values = std::move(payload.bf16_values);
  }
  parts.payload.kind = *kind;
  if (*kind == PayloadKind::kSketch) {
    absl::StatusOr<SketchShape> shape = SketchShapeFromProto(payload.shape);
    if (!shape.ok()) {
      return absl::Status(shape.status().code(), absl::StrCat("payload: ", shape.status().message()));
    }
    parts.payload.sketch = *shape;
  }
  absl::Status valid = ValidatePayload(parts.payload);
  if (!valid.ok()) return absl::InvalidArgumentError(absl::StrCat("payload: ", valid.message()));
  return parts;
}

grpc::ByteBuffer EncodePushReply(std::shared_ptr<const Update> update, uint32_t contributors) {
  std::string fields;  // the update's fields before its values' bytes
  wire::PutVarintField(kUpdateDense, update->dense ? 1 : 0, &fields);
  wire::PutVarintField(kUpdateDim, update->dim, &fields);
  PutIndices(kUpdateIndices, kUpdateIndexGaps, update->indices, &fields);
  wire::PutValuesHeader(kUpdateValues, update->values, &fields);

  std::string header;
  wire::PutVarintField(kReplyContributors, contributors, &header);
  wire::PutVarintField(kReplyHashFamily, kSketchHashFamily, &header);
  wire::PutSubmessageBeforeValues(kReplyUpdate, fields, update->values, &header);
  const std::vector<float>& values = update->values;
  return wire::HeaderThenValues(std::move(header), values, std::move(update));
}

absl::StatusOr<PushReplyParts> DecodePushReply(const grpc::ByteBuffer& buffer, uint64_t group_dim, ReplyDim dims) {
  SliceReader r(buffer);
  PushReplyParts parts;
  std::vector<uint32_t> index_gaps;
  MessageParser m(&r, r.size(), "PushReply");
  RETURN_IF_ERROR(m.Parse([&](const Field& f) -> absl::Status {
    switch (f.number) {
      case kReplyUpdate: {
        size_t end = 0;
        RETURN_IF_ERROR(m.Submessage(f, "update", &end));
        return ParseUpdate(&r, end, group_dim, &parts.update, &index_gaps);
      }
      case kReplyContributors:
        return m.Uint32(f, "contributors", &parts.contributors);
      case kReplyHashFamily:
        return m.Uint32(f, "sketch_hash_family", &parts.sketch_hash_family);
      default:
        return wire::SkipThisField();
    }
  }));
  RETURN_IF_ERROR(MoveGapsToIndices(&index_gaps, "update", &parts.update.indices));
  if (parts.update.dim != group_dim) {
    const bool factors =
        dims == ReplyDim::kFactorsAtMostGroup && parts.update.dense && parts.update.dim < group_dim;
    if (!factors) {
      return absl::InvalidArgumentError(
          absl::StrCat("update: dim ", parts.update.dim, " is not the group's ", group_dim,
                       dims == ReplyDim::kFactorsAtMostGroup ? " (nor a dense answer of factors below it)" : ""));
    }
  }
  absl::Status valid = ValidateAnswer(parts.update, parts.update.dim);
  if (!valid.ok()) return absl::InvalidArgumentError(absl::StrCat("update: ", valid.message()));
  RETURN_IF_ERROR(CheckSketchHashFamily(parts.sketch_hash_family, "the shard's reply"));
  return parts;
}

}  // namespace sketchfuse
