#include "proto/push_codec.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/count_sketch.h"
#include "common/error_feedback.h"
#include "common/status_macros.h"
#include "grpcpp/support/slice.h"
#include "proto/payload_convert.h"

// Floats go on the wire in host order; protobuf's fixed32 is little-endian.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "push_codec assumes a little-endian host");

namespace sketchfuse {
namespace {

enum WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5,
};

// Field numbers, from aggregator.proto and payload.proto.
constexpr uint32_t kRequestRound = 1, kRequestWorker = 2, kRequestPayload = 3;
constexpr uint32_t kReplyUpdate = 1, kReplyContributors = 2, kReplyHashFamily = 3;
constexpr uint32_t kPayloadKind = 1, kPayloadDim = 2, kPayloadIndices = 3, kPayloadValues = 4, kPayloadSketch = 5;
constexpr uint32_t kUpdateDense = 1, kUpdateDim = 2, kUpdateIndices = 3, kUpdateValues = 4;

// ---------------------------------------------------------------- encoding

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void PutTag(uint32_t field, WireType type, std::string* out) { PutVarint((uint64_t{field} << 3) | type, out); }

// Proto3 leaves fields at their default out.
void PutVarintField(uint32_t field, uint64_t v, std::string* out) {
  if (v == 0) return;
  PutTag(field, kVarint, out);
  PutVarint(v, out);
}

void PutBytesField(uint32_t field, absl::string_view bytes, std::string* out) {
  PutTag(field, kLengthDelimited, out);
  PutVarint(bytes.size(), out);
  out->append(bytes.data(), bytes.size());
}

void PutPackedIndices(uint32_t field, const std::vector<uint32_t>& indices, std::string* out) {
  if (indices.empty()) return;
  std::string packed;
  packed.reserve(indices.size() * 4);
  for (uint32_t i : indices) PutVarint(i, &packed);
  PutBytesField(field, packed, out);
}

// The tag and length of packed `values`, whose bytes follow in a slice of
// their own.
void PutValuesHeader(uint32_t field, const std::vector<float>& values, std::string* out) {
  if (values.empty()) return;
  PutTag(field, kLengthDelimited, out);
  PutVarint(values.size() * sizeof(float), out);
}

size_t ValuesBytes(const std::vector<float>& values) { return values.size() * sizeof(float); }

// Field `field` as a submessage made of `fields` followed by the bytes of
// `values`: its tag, its length, and `fields` (the values follow in their
// own slice).
void PutSubmessageBeforeValues(uint32_t field, const std::string& fields,
                               const std::vector<float>& values, std::string* out) {
  PutTag(field, kLengthDelimited, out);
  PutVarint(fields.size() + ValuesBytes(values), out);
  *out += fields;
}

// A buffer of `header` and then the bytes of `values`, which are not copied:
// their slice holds a reference to `owner` (which holds `values`) and drops
// it when gRPC frees the slice.
template <typename Owner>
grpc::ByteBuffer HeaderThenValues(std::string header, const std::vector<float>& values,
                                  std::shared_ptr<const Owner> owner) {
  std::vector<grpc::Slice> slices;
  auto* head = new std::string(std::move(header));
  slices.emplace_back(head->data(), head->size(), +[](void* s) { delete static_cast<std::string*>(s); }, head);
  if (!values.empty()) {
    auto* keep = new std::shared_ptr<const Owner>(std::move(owner));
    // gRPC only reads a slice it is given; the const_cast does not write.
    slices.emplace_back(const_cast<float*>(values.data()), ValuesBytes(values),
                        +[](void* o) { delete static_cast<std::shared_ptr<const Owner>*>(o); }, keep);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// ---------------------------------------------------------------- decoding

// Reads a message spread over gRPC's slices, which it holds references to.
class SliceReader {
 public:
  explicit SliceReader(const grpc::ByteBuffer& buffer) {
    (void)buffer.Dump(&slices_);  // fails only for a null buffer: no slices
    for (const grpc::Slice& s : slices_) size_ += s.size();
    Enter(0);
  }

  size_t position() const { return position_; }
  size_t size() const { return size_; }

  // False when the bytes end before the varint does, or it runs over ten
  // bytes (protobuf's limit).
  bool ReadVarint(uint64_t* value) {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (position_ == size_) return false;
      const uint8_t byte = *cursor_;
      Advance(1);
      if (shift == 63 && byte > 1) return false;
      v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) {
        *value = v;
        return true;
      }
    }
    return false;
  }

  // The next n bytes (n <= what remains), copied to dst or skipped.
  void CopyTo(void* dst, size_t n) {
    char* out = static_cast<char*>(dst);
    while (n > 0) {
      const size_t take = std::min(n, static_cast<size_t>(end_ - cursor_));
      std::memcpy(out, cursor_, take);
      out += take;
      n -= take;
      Advance(take);
    }
  }
  void Skip(size_t n) {
    while (n > 0) {
      const size_t take = std::min(n, static_cast<size_t>(end_ - cursor_));
      n -= take;
      Advance(take);
    }
  }

 private:
  // Moves `n` bytes on, within the current slice, and into the next
  // non-empty one when it ends.
  void Advance(size_t n) {
    cursor_ += n;
    position_ += n;
    if (cursor_ == end_ && position_ < size_) Enter(slice_ + 1);
  }
  void Enter(size_t slice) {
    while (slice < slices_.size() && slices_[slice].size() == 0) ++slice;
    slice_ = slice;
    if (slice < slices_.size()) {
      cursor_ = slices_[slice].begin();
      end_ = slices_[slice].end();
    } else {
      cursor_ = end_ = nullptr;
    }
  }

  std::vector<grpc::Slice> slices_;
  size_t size_ = 0;
  size_t position_ = 0;
  size_t slice_ = 0;
  const uint8_t* cursor_ = nullptr;
  const uint8_t* end_ = nullptr;
};

absl::Status Malformed(absl::string_view message, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("malformed ", message, ": ", problem));
}

struct Field {
  uint32_t number = 0;
  WireType type = kVarint;
};

// Parses the fields of a message that ends at byte `end`, handing each to
// `on_field(field)`, which reads it and returns OK, or returns NOT_FOUND to
// have it skipped as unknown. `name` names the message in errors
// ("PushRequest.payload").
class MessageParser {
 public:
  MessageParser(SliceReader* reader, size_t end, std::string name)
      : r_(*reader), end_(end), name_(std::move(name)) {}

  template <typename OnField>
  absl::Status Parse(OnField on_field) {
    while (r_.position() < end_) {
      uint64_t tag = 0;
      if (!ReadVarint(&tag)) return Error("a field's tag is cut off or longer than ten bytes");
      Field field{static_cast<uint32_t>(tag >> 3), static_cast<WireType>(tag & 7)};
      if ((tag >> 3) == 0 || (tag >> 3) > 0x1fffffff) return Error(absl::StrCat("field number ", tag >> 3, " is out of range"));
      absl::Status handled = on_field(field);
      if (absl::IsNotFound(handled)) {
        RETURN_IF_ERROR(SkipField(field));
      } else if (!handled.ok()) {
        return handled;
      }
    }
    return absl::OkStatus();
  }

  // Readers for on_field. `what` names the field ("dim").
  absl::Status Varint(const Field& field, absl::string_view what, uint64_t* value) {
    RETURN_IF_ERROR(Expect(field, kVarint, what));
    if (!ReadVarint(value)) return Error(absl::StrCat(what, " is cut off or longer than ten bytes"));
    return absl::OkStatus();
  }
  absl::Status Uint32(const Field& field, absl::string_view what, uint32_t* value) {
    uint64_t v = 0;
    RETURN_IF_ERROR(Varint(field, what, &v));
    if (v > UINT32_MAX) return Error(absl::StrCat(what, " = ", v, " does not fit 32 bits"));
    *value = static_cast<uint32_t>(v);
    return absl::OkStatus();
  }
  // The bytes of a length-delimited field.
  absl::Status Bytes(const Field& field, absl::string_view what, std::string* out) {
    size_t length = 0;
    RETURN_IF_ERROR(Length(field, what, &length));
    out->resize(length);
    r_.CopyTo(out->data(), length);
    return absl::OkStatus();
  }
  // Where a length-delimited field's contents end (the reader is at their
  // start).
  absl::Status Submessage(const Field& field, absl::string_view what, size_t* end) {
    size_t length = 0;
    RETURN_IF_ERROR(Length(field, what, &length));
    *end = r_.position() + length;
    return absl::OkStatus();
  }
  // Appends a repeated uint32 field, packed or not.
  absl::Status Indices(const Field& field, absl::string_view what, std::vector<uint32_t>* out) {
    if (field.type == kVarint) {
      uint32_t v = 0;
      RETURN_IF_ERROR(Uint32(field, what, &v));
      out->push_back(v);
      return absl::OkStatus();
    }
    size_t length = 0;
    RETURN_IF_ERROR(Length(field, what, &length));
    const size_t end = r_.position() + length;
    while (r_.position() < end) {
      uint64_t v = 0;
      if (!ReadVarint(&v) || r_.position() > end) {
        return Error(absl::StrCat(what, "[", out->size(), "] is cut off or longer than ten bytes"));
      }
      if (v > UINT32_MAX) return Error(absl::StrCat(what, "[", out->size(), "] = ", v, " does not fit 32 bits"));
      out->push_back(static_cast<uint32_t>(v));
    }
    return absl::OkStatus();
  }
  // Appends a repeated float field, packed (one copy of its bytes) or not.
  absl::Status Floats(const Field& field, absl::string_view what, std::vector<float>* out) {
    if (field.type == kFixed32) {
      if (end_ - r_.position() < sizeof(float)) return Error(absl::StrCat(what, " is cut off"));
      float v = 0;
      r_.CopyTo(&v, sizeof(v));
      out->push_back(v);
      return absl::OkStatus();
    }
    size_t length = 0;
    RETURN_IF_ERROR(Length(field, what, &length));
    if (length % sizeof(float) != 0) {
      return Error(absl::StrCat(what, " has ", length, " bytes, not a multiple of 4"));
    }
    const size_t before = out->size();
    out->resize(before + length / sizeof(float));
    r_.CopyTo(out->data() + before, length);
    return absl::OkStatus();
  }

  absl::Status Error(absl::string_view problem) const { return Malformed(name_, problem); }

 private:
  bool ReadVarint(uint64_t* v) { return r_.ReadVarint(v) && r_.position() <= end_; }

  absl::Status Expect(const Field& field, WireType type, absl::string_view what) const {
    if (field.type == type) return absl::OkStatus();
    return Error(absl::StrCat(what, " (field ", field.number, ") has wire type ", field.type, ", not ", type));
  }

  // A length-delimited field's length, checked against the bytes left.
  absl::Status Length(const Field& field, absl::string_view what, size_t* length) {
    RETURN_IF_ERROR(Expect(field, kLengthDelimited, what));
    uint64_t n = 0;
    if (!ReadVarint(&n)) return Error(absl::StrCat("the length of ", what, " is cut off"));
    if (n > end_ - r_.position()) {
      return Error(absl::StrCat(what, " claims ", n, " bytes but ", end_ - r_.position(), " are left"));
    }
    *length = static_cast<size_t>(n);
    return absl::OkStatus();
  }

  // Skips an unknown field (groups included, nested up to protobuf's depth).
  absl::Status SkipField(Field field) {
    std::vector<uint32_t> open_groups;
    while (true) {
      const size_t left = end_ - r_.position();
      switch (field.type) {
        case kVarint: {
          uint64_t ignored;
          if (!ReadVarint(&ignored)) return Error(absl::StrCat("unknown field ", field.number, " is cut off"));
          break;
        }
        case kFixed64:
        case kFixed32: {
          const size_t n = field.type == kFixed64 ? 8 : 4;
          if (left < n) return Error(absl::StrCat("unknown field ", field.number, " is cut off"));
          r_.Skip(n);
          break;
        }
        case kLengthDelimited: {
          size_t length = 0;
          RETURN_IF_ERROR(Length(field, absl::StrCat("unknown field ", field.number), &length));
          r_.Skip(length);
          break;
        }
        case kStartGroup:
          if (open_groups.size() == 100) return Error("groups are nested too deeply");
          open_groups.push_back(field.number);
          break;
        case kEndGroup:
          if (open_groups.empty() || open_groups.back() != field.number) {
            return Error(absl::StrCat("end of group ", field.number, " without its start"));
          }
          open_groups.pop_back();
          break;
        default:
          return Error(absl::StrCat("field ", field.number, " has the invalid wire type ", field.type));
      }
      if (open_groups.empty()) return absl::OkStatus();
      uint64_t tag = 0;
      if (!ReadVarint(&tag)) return Error(absl::StrCat("group ", open_groups.back(), " is not closed"));
      field = Field{static_cast<uint32_t>(tag >> 3), static_cast<WireType>(tag & 7)};
    }
  }

  SliceReader& r_;
  const size_t end_;
  const std::string name_;
};

absl::Status NotMine() { return absl::NotFoundError(""); }

// The fields a Payload is read from before it is assembled.
struct PayloadFields {
  int64_t kind = 0;
  Payload payload;  // dim, indices, values
  v1::SketchShape shape;
};

absl::Status ParsePayload(SliceReader* r, size_t end, PayloadFields* out) {
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
        return m.Indices(f, "indices", &out->payload.indices);
      case kPayloadValues:
        return m.Floats(f, "values", &out->payload.values);
      case kPayloadSketch: {
        std::string bytes;
        RETURN_IF_ERROR(m.Bytes(f, "sketch", &bytes));
        if (!out->shape.MergeFromString(bytes)) return m.Error("sketch is not a SketchShape");
        return absl::OkStatus();
      }
      default:
        return NotMine();
    }
  });
}

absl::Status ParseUpdate(SliceReader* r, size_t end, Update* out) {
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
        return m.Indices(f, "indices", &out->indices);
      case kUpdateValues:
        return m.Floats(f, "values", &out->values);
      default:
        return NotMine();
    }
  });
}

}  // namespace

grpc::ByteBuffer EncodePushRequest(const v1::RoundKey& round, uint32_t worker,
                                   std::shared_ptr<const Payload> payload) {
  std::string fields;  // the payload's fields before its values' bytes
  PutVarintField(kPayloadKind, PayloadKindToProto(payload->kind), &fields);
  PutVarintField(kPayloadDim, payload->dim, &fields);
  if (payload->kind == PayloadKind::kSketch) {
    v1::SketchShape shape;
    SketchShapeToProto(payload->sketch, &shape);
    PutBytesField(kPayloadSketch, shape.SerializeAsString(), &fields);
  }
  PutPackedIndices(kPayloadIndices, payload->indices, &fields);
  PutValuesHeader(kPayloadValues, payload->values, &fields);

  std::string header;
  PutBytesField(kRequestRound, round.SerializeAsString(), &header);
  PutVarintField(kRequestWorker, worker, &header);
  PutSubmessageBeforeValues(kRequestPayload, fields, payload->values, &header);
  const std::vector<float>& values = payload->values;
  return HeaderThenValues(std::move(header), values, std::move(payload));
}

absl::StatusOr<PushRequestParts> DecodePushRequest(const grpc::ByteBuffer& buffer) {
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
        return ParsePayload(&r, end, &payload);
      }
      default:
        return NotMine();
    }
  }));
  absl::StatusOr<PayloadKind> kind = PayloadKindFromProto(payload.kind);
  if (!kind.ok()) return absl::InvalidArgumentError(absl::StrCat("payload: ", kind.status().message()));
  parts.payload = std::move(payload.payload);
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
  PutVarintField(kUpdateDense, update->dense ? 1 : 0, &fields);
  PutVarintField(kUpdateDim, update->dim, &fields);
  PutPackedIndices(kUpdateIndices, update->indices, &fields);
  PutValuesHeader(kUpdateValues, update->values, &fields);

  std::string header;
  PutVarintField(kReplyContributors, contributors, &header);
  PutVarintField(kReplyHashFamily, kSketchHashFamily, &header);
  PutSubmessageBeforeValues(kReplyUpdate, fields, update->values, &header);
  const std::vector<float>& values = update->values;
  return HeaderThenValues(std::move(header), values, std::move(update));
}

absl::StatusOr<PushReplyParts> DecodePushReply(const grpc::ByteBuffer& buffer) {
  SliceReader r(buffer);
  PushReplyParts parts;
  MessageParser m(&r, r.size(), "PushReply");
  RETURN_IF_ERROR(m.Parse([&](const Field& f) -> absl::Status {
    switch (f.number) {
      case kReplyUpdate: {
        size_t end = 0;
        RETURN_IF_ERROR(m.Submessage(f, "update", &end));
        return ParseUpdate(&r, end, &parts.update);
      }
      case kReplyContributors:
        return m.Uint32(f, "contributors", &parts.contributors);
      case kReplyHashFamily:
        return m.Uint32(f, "sketch_hash_family", &parts.sketch_hash_family);
      default:
        return NotMine();
    }
  }));
  absl::Status valid = ValidateUpdate(parts.update, parts.update.dim);
  if (!valid.ok()) return absl::InvalidArgumentError(absl::StrCat("update: ", valid.message()));
  RETURN_IF_ERROR(CheckSketchHashFamily(parts.sketch_hash_family, "the shard's reply"));
  return parts;
}

}  // namespace sketchfuse
