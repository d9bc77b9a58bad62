// The protobuf wire format, read from and written to gRPC byte buffers
// without generated messages: varints, tags, length-delimited and packed
// fields, and a parser that hands each field of a message to a callback and
// skips the unknown ones (groups included). proto/push_codec.h builds the
// Push RPC's messages from it; nothing here knows those messages.
//
// Contracts: a reader never reads past the bytes it holds; every malformed
// input (a cut-off varint or field, a varint over ten bytes, a length past
// the message's end, a wire type that is not the field's, an unclosed or
// mismatched group, groups nested over 100 deep) is INVALID_ARGUMENT naming
// the message, the field and the problem. Packed floats are copied once,
// from gRPC's slices into the destination. Little-endian hosts only
// (protobuf's fixed32 is little-endian; floats are written in host order).
//
// NOTE: the readers and writers hold no shared state; each object is used by
// one thread.
#ifndef SKETCHFUSE_PROTO_WIRE_FORMAT_H_
#define SKETCHFUSE_PROTO_WIRE_FORMAT_H_

#include <algorithm>
#include <cstdint>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/bf16.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the wire format code assumes a little-endian host");

namespace sketchfuse {
namespace wire {

enum WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5,
};

// ---------------------------------------------------------------- writing

void PutVarint(uint64_t v, std::string* out);
void PutTag(uint32_t field, WireType type, std::string* out);
// A varint field; proto3 leaves fields at their default (0) out.
void PutVarintField(uint32_t field, uint64_t v, std::string* out);
void PutBytesField(uint32_t field, absl::string_view bytes, std::string* out);
// A packed repeated uint32 field (nothing when empty).
void PutPackedIndices(uint32_t field, const std::vector<uint32_t>& indices, std::string* out);
// The strictly ascending `indices` as a packed repeated uint32 field of their
// gaps: the first index, then each index minus the one before (nothing when
// empty).
void PutPackedIndexGaps(uint32_t field, const std::vector<uint32_t>& indices, std::string* out);
// The tag and length of packed `values`, whose bytes follow in a slice of
// their own (nothing when empty).
void PutValuesHeader(uint32_t field, const std::vector<float>& values, std::string* out);
inline size_t ValuesBytes(const std::vector<float>& values) { return values.size() * sizeof(float); }
// Field `field` as a submessage made of `fields` followed by the bytes of
// `values`: its tag, its length, and `fields` (the values follow in their
// own slice).
void PutSubmessageBeforeValues(uint32_t field, const std::string& fields, const std::vector<float>& values,
                               std::string* out);

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

// ---------------------------------------------------------------- reading

// Reads floats from bytes at any alignment: a random-access iterator whose
// element is copied out with memcpy, so std::vector::insert builds floats
// straight from a slice's bytes.
class UnalignedFloats {
 public:
  using iterator_category = std::random_access_iterator_tag;
  using value_type = float;
  using difference_type = std::ptrdiff_t;
  using pointer = const float*;
  using reference = float;

  explicit UnalignedFloats(const uint8_t* at) : at_(at) {}
  float operator*() const {
    float v;
    std::memcpy(&v, at_, sizeof(v));
    return v;
  }
  float operator[](difference_type i) const { return *(*this + i); }
  UnalignedFloats& operator++() {
    at_ += sizeof(float);
    return *this;
  }
  UnalignedFloats operator++(int) {
    UnalignedFloats before = *this;
    ++*this;
    return before;
  }
  UnalignedFloats& operator--() {
    at_ -= sizeof(float);
    return *this;
  }
  UnalignedFloats operator--(int) {
    UnalignedFloats before = *this;
    --*this;
    return before;
  }
  UnalignedFloats& operator+=(difference_type n) {
    at_ += n * static_cast<difference_type>(sizeof(float));
    return *this;
  }
  UnalignedFloats& operator-=(difference_type n) { return *this += -n; }
  friend UnalignedFloats operator+(UnalignedFloats it, difference_type n) { return it += n; }
  friend UnalignedFloats operator+(difference_type n, UnalignedFloats it) { return it += n; }
  friend UnalignedFloats operator-(UnalignedFloats it, difference_type n) { return it -= n; }
  friend difference_type operator-(UnalignedFloats a, UnalignedFloats b) {
    return (a.at_ - b.at_) / static_cast<difference_type>(sizeof(float));
  }
  friend bool operator==(UnalignedFloats a, UnalignedFloats b) { return a.at_ == b.at_; }
  friend bool operator!=(UnalignedFloats a, UnalignedFloats b) { return a.at_ != b.at_; }
  friend bool operator<(UnalignedFloats a, UnalignedFloats b) { return a.at_ < b.at_; }
  friend bool operator>(UnalignedFloats a, UnalignedFloats b) { return a.at_ > b.at_; }
  friend bool operator<=(UnalignedFloats a, UnalignedFloats b) { return a.at_ <= b.at_; }
  friend bool operator>=(UnalignedFloats a, UnalignedFloats b) { return a.at_ >= b.at_; }

 private:
  const uint8_t* at_;
};

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
  // Appends the next `count` floats (little-endian bytes, as x86 and ARM hold
  // them) to `out`, copying each byte once: no zero-fill of the new elements
  // first, as resize-then-copy would, which costs a pass over a push's
  // values. The caller checked that 4 * count bytes are left.
  void AppendFloats(size_t count, std::vector<float>* out) {
    out->reserve(out->size() + count);
    while (count > 0) {
      const size_t whole = std::min(count, static_cast<size_t>(end_ - cursor_) / sizeof(float));
      if (whole == 0) {  // one float split between two slices
        float v = 0;
        CopyTo(&v, sizeof(v));
        out->push_back(v);
        --count;
        continue;
      }
      out->insert(out->end(), UnalignedFloats(cursor_), UnalignedFloats(cursor_ + whole * sizeof(float)));
      count -= whole;
      Advance(whole * sizeof(float));
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

// INVALID_ARGUMENT "malformed <message>: <problem>".
absl::Status Malformed(absl::string_view message, absl::string_view problem);

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
  // Appends a repeated uint32 field, packed or not; refuses (naming `most`
  // and `most_why`, what bounds it) to hold more than `most` values in
  // `out`, before decoding past them: a varint of one byte would otherwise
  // take four.
  absl::Status Indices(const Field& field, absl::string_view what, std::vector<uint32_t>* out,
                       size_t most = SIZE_MAX, absl::string_view most_why = "") {
    auto too_many = [&] {
      return Error(absl::StrCat(what, " holds more than ", most, " values, the most this message allows (", most_why,
                                ")"));
    };
    if (field.type == kVarint) {
      uint32_t v = 0;
      RETURN_IF_ERROR(Uint32(field, what, &v));
      if (out->size() >= most) return too_many();
      out->push_back(v);
      return absl::OkStatus();
    }
    size_t length = 0;
    RETURN_IF_ERROR(Length(field, what, &length));
    const size_t end = r_.position() + length;
    // At most one value per byte, and at most `most` in all: reserved once,
    // so the vector never holds twice what it decoded (growth by doubling).
    out->reserve(out->size() + std::min(length, most - std::min(most, out->size())));
    while (r_.position() < end) {
      uint64_t v = 0;
      if (!ReadVarint(&v) || r_.position() > end) {
        return Error(absl::StrCat(what, "[", out->size(), "] is cut off or longer than ten bytes"));
      }
      if (v > UINT32_MAX) return Error(absl::StrCat(what, "[", out->size(), "] = ", v, " does not fit 32 bits"));
      if (out->size() >= most) return too_many();
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
    r_.AppendFloats(length / sizeof(float), out);
    return absl::OkStatus();
  }

  // Replaces `out` with a bytes field's bfloat16 values (2 bytes each, little
  // endian) as floats, decoded straight from the message's slices (no copy
  // of the bytes first). INVALID_ARGUMENT "<what> has N bytes, not two a
  // value" for an odd length.
  absl::Status Bf16Floats(const Field& field, absl::string_view what, std::vector<float>* out) {
    size_t length = 0;
    RETURN_IF_ERROR(Length(field, what, &length));
    if (length % 2 != 0) {
      r_.Skip(length);
      return absl::InvalidArgumentError(absl::StrCat(what, " has ", length, " bytes, not two a value"));
    }
    out->clear();
    out->reserve(length / 2);
    for (size_t i = 0; i < length / 2; ++i) {
      uint16_t bits = 0;
      r_.CopyTo(&bits, sizeof(bits));  // little-endian, as x86 and ARM hold it
      out->push_back(Bf16ToFloat(bits));
    }
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

// What an on_field callback returns for a field it does not read: the
// parser skips it as unknown.
inline absl::Status SkipThisField() { return absl::NotFoundError(""); }

}  // namespace wire
}  // namespace sketchfuse

#endif  // SKETCHFUSE_PROTO_WIRE_FORMAT_H_
