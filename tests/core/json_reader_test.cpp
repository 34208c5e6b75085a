#include "gantry/core/json_reader.h"

#include <gtest/gtest.h>

#include <limits>

#include "gantry/core/json.h"

namespace gantry {
namespace {

using nlohmann::json;

TEST(JsonReader, AbsentAndNullLeaveTheValueAlone) {
  const json obj = json::parse(R"({"a": null})");
  bool b = true;
  std::string s = "keep";
  std::optional<int64_t> i = 7;
  std::optional<double> d = 0.5;
  std::vector<std::string> v{"x"};
  for (const char* key : {"a", "missing"}) {
    EXPECT_FALSE(read_json_bool(obj, key, "", b));
    EXPECT_FALSE(read_json_string(obj, key, "", s));
    EXPECT_FALSE(read_json_int(obj, key, "", 0, 10, i));
    EXPECT_FALSE(read_json_number(obj, key, "", 0, 1, d));
    EXPECT_FALSE(read_json_strings(obj, key, "", v));
  }
  EXPECT_TRUE(b);
  EXPECT_EQ(s, "keep");
  EXPECT_EQ(i, 7);
  EXPECT_EQ(d, 0.5);
  EXPECT_EQ(v, std::vector<std::string>{"x"});
}

TEST(JsonReader, ReadsEachType) {
  const json obj = json::parse(R"({"b": false, "s": "hi", "i": 42, "d": 1.25, "stop": ["a", "", "b"]})");
  bool b = true;
  std::string s;
  std::optional<int64_t> i;
  std::optional<double> d;
  std::vector<std::string> stop;
  EXPECT_FALSE(read_json_bool(obj, "b", "", b));
  EXPECT_FALSE(read_json_string(obj, "s", "", s));
  EXPECT_FALSE(read_json_int(obj, "i", "", 0, 100, i));
  EXPECT_FALSE(read_json_number(obj, "d", "", 0, 2, d));
  EXPECT_FALSE(read_json_strings(obj, "stop", "", stop));
  EXPECT_FALSE(b);
  EXPECT_EQ(s, "hi");
  EXPECT_EQ(i, 42);
  EXPECT_EQ(d, 1.25);
  EXPECT_EQ(stop, (std::vector<std::string>{"a", "b"}));  // empty strings dropped
}

TEST(JsonReader, WrongTypesNameTheFieldWithItsPath) {
  const json obj = json::parse(R"({"x": "text", "n": [1]})");
  bool b = false;
  auto e = read_json_bool(obj, "x", "options.", b);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->field, "options.x");
  EXPECT_EQ(e->problem, "must be a boolean, got string");
  EXPECT_EQ(e->quoted(), "'options.x' must be a boolean, got string");
  EXPECT_EQ(e->prefixed(), "options.x: must be a boolean, got string");
  std::optional<int64_t> i;
  e = read_json_int(obj, "n", "messages[2].", 0, 5, i);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->quoted(), "'messages[2].n' must be an integer, got array");
  std::string s;
  std::optional<double> d;
  ASSERT_TRUE(read_json_string(obj, "n", "", s));
  ASSERT_TRUE(read_json_number(obj, "x", "", 0, 1, d));
  EXPECT_EQ(read_json_number(obj, "x", "", 0, 1, d)->problem, "must be a number, got string");
  EXPECT_FALSE(i.has_value());
  EXPECT_FALSE(d.has_value());
  EXPECT_TRUE(s.empty());
}

TEST(JsonReader, IntegerRangesIncludingBeyondInt64) {
  const json obj =
      json::parse(R"({"small": -1, "big": 18446744073709551615, "ok": 128, "f": 100.0, "g": 1.5})");
  std::optional<int64_t> i;
  auto e = read_json_int(obj, "small", "", 1, 128, i);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->problem, "must be an integer in 1..128, got -1");
  e = read_json_int(obj, "big", "", 1, 128, i);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->problem, "must be an integer in 1..128, got 18446744073709551615");
  EXPECT_FALSE(read_json_int(obj, "ok", "", 1, 128, i));
  EXPECT_EQ(i, 128);
  // 100.0: an integer only when integral floats are accepted; 1.5 never.
  ASSERT_TRUE(read_json_int(obj, "f", "", 0, 1000, i));
  EXPECT_FALSE(read_json_int(obj, "f", "", 0, 1000, i, JsonIntegers::kIntegralFloat));
  EXPECT_EQ(i, 100);
  EXPECT_EQ(read_json_int(obj, "f", "", 0, 10, i, JsonIntegers::kIntegralFloat)->problem,
            "must be an integer in 0..10, got 100.0");
  EXPECT_EQ(read_json_int(obj, "g", "", 0, 10, i, JsonIntegers::kIntegralFloat)->problem,
            "must be an integer, got number");
}

TEST(JsonReader, NumberRanges) {
  const json obj = json::parse(R"({"t": 2.5, "u": -2})");
  std::optional<double> d;
  auto e = read_json_number(obj, "t", "", 0, 2, d);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->problem, "must be a number in 0..2, got 2.5");
  EXPECT_FALSE(read_json_number(obj, "u", "", -2, 2, d));
  EXPECT_EQ(d, -2);
}

TEST(JsonReader, StringListsAreBoundedAndChecked) {
  const json obj = json::parse(R"({"five": ["a","b","c","d","e"], "mixed": ["a", 3], "num": 7, "one": "x"})");
  std::vector<std::string> out;
  auto e = read_json_strings(obj, "five", "", out, 4);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->problem, "must be a string or an array of up to 4 strings, got 5 strings");
  e = read_json_strings(obj, "mixed", "", out);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->field, "mixed");
  EXPECT_EQ(e->problem, "must be a string or an array of strings, got an element of type number at 1");
  EXPECT_TRUE(out.empty());  // nothing appended from a refused list
  e = read_json_strings(obj, "num", "", out);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->problem, "must be a string or an array of strings, got number");
  EXPECT_FALSE(read_json_strings(obj, "one", "", out));
  EXPECT_EQ(out, std::vector<std::string>{"x"});
}

TEST(JsonReader, DuplicateKeysAreRefusedAtParse) {
  auto r = parse_json_unique_keys(R"({"model": "a", "model": "b"})", "the request body");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("duplicate key 'model'"), std::string::npos);
}

}  // namespace
}  // namespace gantry
