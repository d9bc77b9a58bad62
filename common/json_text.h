// Writing JSON by hand: string literals and numbers, for the summaries,
// timelines and listings the daemons print (readers are Python's json and
// the launchers).
#ifndef SKETCHFUSE_COMMON_JSON_TEXT_H_
#define SKETCHFUSE_COMMON_JSON_TEXT_H_

#include <string>

namespace sketchfuse {

// `text` as a JSON string literal, quotes included: '"', '\' and control
// characters escaped; other bytes (UTF-8 included) as they are.
std::string JsonString(const std::string& text);

// `value` with `decimals` decimals, or null when it is NaN or infinite (JSON
// has neither).
std::string JsonNumber(double value, int decimals);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_JSON_TEXT_H_
