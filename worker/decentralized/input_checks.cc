#include "worker/decentralized/input_checks.h"

#include "absl/strings/str_cat.h"

namespace sketchfuse {

uint32_t PointToPointTag(uint64_t step, int group, int round) {
  // 16 bits of step, 11 of group, 5 of round: messages of one pair are
  // consumed in order, so a tag only has to differ from those in flight.
  return static_cast<uint32_t>(((step & 0xFFFF) << 16) | ((static_cast<uint32_t>(group) & 0x7FF) << 5) |
                               (static_cast<uint32_t>(round) & 0x1F));
}

namespace decentralized_internal {

absl::Status CheckInput(const GroupInput& input, PayloadKind kind, bool needs_encoded) {
  if (input.payload == nullptr) return absl::InvalidArgumentError("no payload");
  if (input.payload->kind != kind) {
    return absl::InvalidArgumentError(absl::StrCat("this scheme moves ", PayloadKindName(kind), " payloads, not ",
                                                   PayloadKindName(input.payload->kind)));
  }
  if (absl::Status s = ValidatePayload(*input.payload); !s.ok()) return s;
  if (needs_encoded && input.encoded.size() != input.payload->dim) {
    return absl::InvalidArgumentError(absl::StrCat("the encoded vector has ", input.encoded.size(),
                                                   " values for a group of ", input.payload->dim));
  }
  return absl::OkStatus();
}

Settlement Release(const Update& released) { return SettleAt(released); }

}  // namespace decentralized_internal
}  // namespace sketchfuse
