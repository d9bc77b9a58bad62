#include "proto/wire_format.h"

namespace sketchfuse {
namespace wire {

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void PutTag(uint32_t field, WireType type, std::string* out) { PutVarint((uint64_t{field} << 3) | type, out); }

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

void PutPackedIndexGaps(uint32_t field, const std::vector<uint32_t>& indices, std::string* out) {
  if (indices.empty()) return;
  std::string packed;
  packed.reserve(indices.size() * 2);
  uint32_t previous = 0;
  for (uint32_t i : indices) {
    PutVarint(i - previous, &packed);
    previous = i;
  }
  PutBytesField(field, packed, out);
}

void PutValuesHeader(uint32_t field, const std::vector<float>& values, std::string* out) {
  if (values.empty()) return;
  PutTag(field, kLengthDelimited, out);
  PutVarint(values.size() * sizeof(float), out);
}

void PutSubmessageBeforeValues(uint32_t field, const std::string& fields,
                               const std::vector<float>& values, std::string* out) {
  PutTag(field, kLengthDelimited, out);
  PutVarint(fields.size() + ValuesBytes(values), out);
  *out += fields;
}

absl::Status Malformed(absl::string_view message, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("malformed ", message, ": ", problem));
}

}  // namespace wire
}  // namespace sketchfuse
