#include "gantry/core/utf8.h"

#include <gtest/gtest.h>

namespace gantry {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8, WellFormedTextIsKept) {
  for (std::string_view s :
       {"", "model-a", "caf\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\xF4\x8F\xBF\xBF"}) {
    EXPECT_TRUE(is_valid_utf8(s)) << s;
    EXPECT_EQ(to_valid_utf8(s), s);
  }
}

TEST(Utf8, IllFormedSequencesAreRefusedAndReplaced) {
  // The %FF%FE of a URL, a lone continuation byte, an overlong '/', a surrogate, past U+10FFFF, truncated.
  EXPECT_FALSE(is_valid_utf8("\xFF\xFE"));
  EXPECT_EQ(to_valid_utf8("a\xFF\xFE"
                          "b"),
            "a" + kFffd + kFffd + "b");
  EXPECT_EQ(to_valid_utf8("\x80"), kFffd);
  EXPECT_EQ(to_valid_utf8("\xC0\xAF"), kFffd + kFffd);
  EXPECT_EQ(to_valid_utf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);
  EXPECT_EQ(to_valid_utf8("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);
  // A truncated 3-byte sequence is one maximal subpart: one U+FFFD, then the next character.
  EXPECT_EQ(to_valid_utf8("\xE2\x82"
                          "x"),
            kFffd + "x");
  EXPECT_EQ(to_valid_utf8("\xF0\x9F\x98"), kFffd);
  for (std::string_view s : {"\xFF\xFE", "\x80", "\xC0\xAF", "\xE2\x82", "\xF0\x9F\x98"})
    EXPECT_TRUE(is_valid_utf8(to_valid_utf8(s)));
}

}  // namespace
}  // namespace gantry
