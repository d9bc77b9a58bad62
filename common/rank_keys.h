// The key-value store's convention for a rank's own keys (the coordinator's
// store, server/coordinator_core.h, and the in-process one,
// worker/collective/key_value_store.h): a key whose last two components are
// "rank" and a decimal number r ("collective/<run>/gloo/rank/3") belongs to
// rank r, which alone may write it, and may write it again (a restarted
// rank's new address); every other key is written once.
#ifndef SKETCHFUSE_COMMON_RANK_KEYS_H_
#define SKETCHFUSE_COMMON_RANK_KEYS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace sketchfuse {

// The rank `key` belongs to, or none for a key of no rank.
inline std::optional<uint32_t> RankOfKey(absl::string_view key) {
  const size_t slash = key.rfind('/');
  if (slash == absl::string_view::npos || slash + 1 == key.size()) return std::nullopt;
  const absl::string_view prefix = key.substr(0, slash);
  if (!absl::EndsWith(prefix, "/rank") && prefix != "rank") return std::nullopt;
  const absl::string_view number = key.substr(slash + 1);
  if (number.front() < '0' || number.front() > '9') return std::nullopt;  // no sign, no space
  uint32_t rank = 0;
  if (!absl::SimpleAtoi(number, &rank)) return std::nullopt;
  return rank;
}

// `prefix`/rank/`rank`: rank `rank`'s key under `prefix`.
inline std::string RankKey(absl::string_view prefix, uint32_t rank) {
  return absl::StrCat(prefix, "/rank/", rank);
}

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_RANK_KEYS_H_
