#include "common/json_text.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

TEST(JsonTextTest, StringsEscapeQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonString(""), "\"\"");
  EXPECT_EQ(JsonString("plain"), "\"plain\"");
  EXPECT_EQ(JsonString("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(JsonString("line\nnext\ttab"), "\"line\\nnext\\ttab\"");
  EXPECT_EQ(JsonString(std::string("\x01\x1f", 2)), "\"\\u0001\\u001f\"");
  EXPECT_EQ(JsonString("caf\xc3\xa9"), "\"caf\xc3\xa9\"");  // UTF-8 passes through
}

TEST(JsonTextTest, NumbersHaveTheirDecimalsAndNonFiniteValuesAreNull) {
  EXPECT_EQ(JsonNumber(0.5, 3), "0.500");
  EXPECT_EQ(JsonNumber(-2, 0), "-2");
  EXPECT_EQ(JsonNumber(std::nan(""), 2), "null");
  EXPECT_EQ(JsonNumber(std::numeric_limits<double>::infinity(), 2), "null");
  EXPECT_EQ(JsonNumber(-std::numeric_limits<double>::infinity(), 2), "null");
}

}  // namespace
}  // namespace sketchfuse
