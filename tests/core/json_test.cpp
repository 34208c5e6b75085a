#include "gantry/core/json.h"

#include <gtest/gtest.h>

namespace gantry {
namespace {

TEST(ParseJson, NumberOverflowIsAnErrorNotAnException) {
  // nlohmann throws out_of_range for this even with allow_exceptions=false (found by manifest_fuzz).
  for (const char* text : {"1e6079", "{\"a\": -1e99999}", "[1e400]"}) {
    auto j = parse_json(text, "test.json");
    ASSERT_FALSE(j.ok()) << text;
    EXPECT_EQ(j.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(j.status().message().find("test.json: not valid JSON"), std::string::npos)
        << j.status().message();
  }
}

TEST(ParseJson, ParsesValidTextAndRejectsGarbage) {
  auto j = parse_json<nlohmann::ordered_json>("{\"b\": 1, \"a\": [true]}", "x");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->begin().key(), "b");
  EXPECT_FALSE(parse_json("{\"a\": ", "x").ok());
  EXPECT_FALSE(parse_json("", "x").ok());
}

std::string nested(size_t depth, char open = '[', char close = ']') {
  std::string s(depth, open);
  if (open == '{') {
    s.clear();
    for (size_t i = 0; i < depth; ++i) s += i + 1 < depth ? "{\"a\":" : "{";
  }
  return s + std::string(depth, close);
}

TEST(ParseJson, AcceptsTheDepthLimitAndRefusesOneLevelMore) {
  for (char open : {'[', '{'}) {
    const char close = open == '[' ? ']' : '}';
    EXPECT_TRUE(parse_json(nested(kMaxJsonDepth, open, close), "x").ok()) << open;
    EXPECT_TRUE(parse_json_unique_keys(nested(kMaxJsonDepth, open, close), "x").ok()) << open;
    for (auto r : {parse_json(nested(kMaxJsonDepth + 1, open, close), "deep.json"),
                   parse_json_unique_keys(nested(kMaxJsonDepth + 1, open, close), "deep.json")}) {
      ASSERT_FALSE(r.ok()) << open;
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(r.status().message().find("deep.json: JSON nests deeper than 64 levels"), std::string::npos)
          << r.status().message();
    }
  }
}

TEST(ParseJson, ADepthBombIsRefusedBeforeParsing) {
  // 100,000 levels parse fine in nlohmann, then copying or dumping them overflows the stack.
  const std::string bomb = "{\"parameters\": " + nested(100000) + "}";
  auto r = parse_json(bomb, "request");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nests deeper than 64 levels"), std::string::npos);
  // Unbalanced: only opening brackets (the parser would call it truncated; the depth is what matters).
  EXPECT_FALSE(check_json_depth(std::string(100000, '['), "x").ok());
}

TEST(ParseJson, BracketsInsideStringsDoNotCount) {
  const std::string in_string = "[\"" + std::string(200, '[') + "\\\"" + std::string(200, '{') + "\"]";
  EXPECT_TRUE(check_json_depth(in_string, "x").ok());
  auto j = parse_json(in_string, "x");
  ASSERT_TRUE(j.ok()) << j.status().to_string();
  EXPECT_EQ((*j)[0].get<std::string>().size(), 401u);
  // An escaped backslash ends right before the closing quote: the brackets after it count again.
  EXPECT_FALSE(check_json_depth("[\"\\\\\", " + nested(kMaxJsonDepth) + "]", "x").ok());
  EXPECT_TRUE(check_json_depth("[\"\\\\\", " + nested(kMaxJsonDepth - 1) + "]", "x").ok());
  // A closing bracket in a key does not lower the depth.
  EXPECT_FALSE(check_json_depth("{\"]]]]\": " + nested(kMaxJsonDepth) + "}", "x").ok());
}

TEST(ParseJson, MembersAreBoundedWhenAsked) {
  JsonShapeLimits limits;
  limits.max_object_members = 3;
  limits.max_members = 5;
  // Colons in strings and array elements are no members.
  EXPECT_TRUE(
      check_json_shape(R"({"a:b": [1, 2, 3, 4, 5], "c": "x:y:z", "d": {"e": 1, "f": 2}})", "x", limits).ok());
  auto wide = parse_json<nlohmann::ordered_json>(R"({"a": 1, "b": 2, "c": 3, "d": 4})", "wide.json", limits);
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.status().message().find("wide.json: a JSON object has more than 3 members"),
            std::string::npos)
      << wide.status().message();
  auto many =
      check_json_shape(R"([{"a": 1, "b": 2}, {"a": 1, "b": 2}, {"a": 1, "b": 2}])", "many.json", limits);
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.message().find("many.json: JSON objects have more than 5 members in all"), std::string::npos)
      << many.message();
  // By default only the depth is bounded.
  std::string big = "{";
  for (int i = 0; i < 5000; ++i) big += (i ? ",\"k" : "\"k") + std::to_string(i) + "\": 0";
  EXPECT_TRUE(parse_json(big + "}", "x").ok());
}

}  // namespace
}  // namespace gantry
