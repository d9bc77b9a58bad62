#include "common/error_text.h"

#include <string>

#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

TEST(QuoteFieldTest, ShortFieldsAreQuotedWhole) {
  EXPECT_EQ(QuoteField("job-1"), "'job-1'");
  EXPECT_EQ(QuoteField(""), "''");
  EXPECT_EQ(QuoteField(std::string(kQuotedFieldMaxBytes, 'a')), "'" + std::string(kQuotedFieldMaxBytes, 'a') + "'");
}

TEST(QuoteFieldTest, LongFieldsAreCutAndTheirLengthNamed) {
  const std::string quoted = QuoteField(std::string(1 << 20, 'x'));
  EXPECT_EQ(quoted, "'" + std::string(kQuotedFieldMaxBytes, 'x') + "...' (1048576 bytes)");
  EXPECT_LE(quoted.size(), kQuotedFieldMaxBytes + 32);
}

TEST(QuoteFieldTest, UnprintableBytesAreShownAsQuestionMarks) {
  EXPECT_EQ(QuoteField(std::string("a\nb\0c\xff", 6)), "'a?b?c?'");
}

}  // namespace
}  // namespace sketchfuse
