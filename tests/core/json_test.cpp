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

}  // namespace
}  // namespace gantry
