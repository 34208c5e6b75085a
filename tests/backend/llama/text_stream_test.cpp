#include "backend/llama/text_stream.h"

#include <gtest/gtest.h>

namespace gantry::llama {
namespace {

TEST(TextStream, HoldsBackPartialStopStringsAcrossPieces) {
  TextStream s({"STOP"});
  EXPECT_EQ(s.push("hello S"), "hello ");
  EXPECT_EQ(s.push("T"), "");
  EXPECT_EQ(s.push("x"), "STx");  // not a stop after all: released
  EXPECT_EQ(s.push(" ST"), " ");
  EXPECT_EQ(s.push("OP and more"), "");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.push("later"), "");
  EXPECT_EQ(s.flush(), "");
}

TEST(TextStream, KeepsUtf8CharactersWhole) {
  TextStream s;
  const std::string e_acute = "\xC3\xA9";   // é
  const std::string euro = "\xE2\x82\xAC";  // €
  EXPECT_EQ(s.push("a\xC3"), "a");
  EXPECT_EQ(s.push("\xA9"), e_acute);
  EXPECT_EQ(s.push("\xE2"), "");
  EXPECT_EQ(s.push("\x82"), "");
  EXPECT_EQ(s.push("\xAC!"), euro + "!");
  EXPECT_EQ(s.push("\xF0\x9F"), "");
  EXPECT_EQ(s.flush(), "\xF0\x9F");  // whatever is left comes out at the end
}

TEST(TextStream, StopInsideOnePieceCutsThere) {
  TextStream s({"\n\n", "END"});
  EXPECT_EQ(s.push("line one\n\nline two"), "line one");
  EXPECT_TRUE(s.stopped());
}

TEST(Utf8, IncompleteTail) {
  EXPECT_EQ(incomplete_utf8_tail(""), 0u);
  EXPECT_EQ(incomplete_utf8_tail("abc"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("a\xE2\x82"), 2u);
  EXPECT_EQ(incomplete_utf8_tail("a\xE2\x82\xAC"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("\xF0"), 1u);
}

}  // namespace
}  // namespace gantry::llama
