// Quoting a client's field in an error message, cut to a stated length.
//
// A status message that echoes a request's field whole (a 1 MiB job name)
// grows past what gRPC clients accept in trailing metadata: they then see
// RESOURCE_EXHAUSTED instead of the code the server meant, and may lose the
// connection. Every message that quotes a field a client chose goes through
// QuoteField.
//
// NOTE: pure functions; thread-safe.
#ifndef SKETCHFUSE_COMMON_ERROR_TEXT_H_
#define SKETCHFUSE_COMMON_ERROR_TEXT_H_

#include <cstddef>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace sketchfuse {

// The longest part of a client's field an error message quotes, in bytes.
inline constexpr size_t kQuotedFieldMaxBytes = 64;

// `field` in single quotes, with bytes outside printable ASCII shown as '?',
// cut to kQuotedFieldMaxBytes with its full length named: 'abc' or
// 'abcd...' (1048576 bytes).
inline std::string QuoteField(absl::string_view field) {
  std::string out = "'";
  const size_t shown = field.size() <= kQuotedFieldMaxBytes ? field.size() : kQuotedFieldMaxBytes;
  for (size_t i = 0; i < shown; ++i) {
    const unsigned char c = static_cast<unsigned char>(field[i]);
    out.push_back(c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?');
  }
  if (shown < field.size()) return absl::StrCat(out, "...' (", field.size(), " bytes)");
  out.push_back('\'');
  return out;
}

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_ERROR_TEXT_H_
