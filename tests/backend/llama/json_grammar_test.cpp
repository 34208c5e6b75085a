// JSON output constraints: the grammars llama.cpp's json_schema_to_grammar writes for the schemas our
// checks let through, the refusals of those checks (by name, and before llama.cpp's converter runs),
// the size bounds, llama.cpp accepting every grammar, and generation on the tiny model producing JSON
// that parses and fits the schema.
#include "gantry/backend/llama/json_grammar.h"

#include <gtest/gtest.h>
#include <llama.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "backend/llama/llama_test_util.h"
#include "gantry/backend/llama/batch_engine.h"

namespace gantry::llama {
namespace {

using backend::FinishReason;
using backend::GenerationRequest;
using backend::OutputConstraint;
using nlohmann::json;

std::string grammar_ok(const std::string& schema) {
  auto g = json_schema_grammar(schema);
  EXPECT_TRUE(g.ok()) << schema.substr(0, 300) << ": " << g.status().to_string();
  return g.ok() ? *g : std::string();
}

void expect_refused(const std::string& schema, const std::string& phrase) {
  auto g = json_schema_grammar(schema);
  ASSERT_FALSE(g.ok()) << schema.substr(0, 300) << " was accepted:\n" << g->substr(0, 2000);
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find(phrase), std::string::npos) << g.status().message();
  // Our checks refused it, not llama.cpp's converter after them.
  EXPECT_EQ(g.status().message().find("llama.cpp could not convert"), std::string::npos)
      << g.status().message();
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The body of rule `name` in grammar `g` ("<missing>" when it has none).
std::string rule(const std::string& g, const std::string& name) {
  const std::string head = name + " ::= ";
  for (size_t at = 0; at < g.size();) {
    const size_t end = std::min(g.find('\n', at), g.size());
    if (g.compare(at, head.size(), head) == 0) return g.substr(at + head.size(), end - at - head.size());
    at = end + 1;
  }
  return "<missing>";
}

// A schema whose every value is bounded (booleans, enums, bounded integers, null, const, a date, a
// tuple), so a generation with enough max_tokens always completes: the grammar then allows only
// end-of-generation.
const char* kBoundedSchema = R"({
  "type": "object",
  "properties": {
    "ok": {"type": "boolean"},
    "color": {"enum": ["red", "green", "blue"]},
    "n": {"type": "integer"},
    "inner": {"type": "object", "properties": {"z": {"type": "null"}, "k": {"const": 7}}, "required": ["z", "k"]},
    "range": {"type": "integer", "minimum": 10, "exclusiveMaximum": 100},
    "maybe": {"type": "boolean"},
    "pick": {"anyOf": [{"type": "null"}, {"type": "boolean"}]},
    "pair": {"type": "array", "prefixItems": [{"type": "boolean"}, {"type": ["integer", "null"], "maximum": -3}]},
    "day": {"type": "string", "format": "date"}
  },
  "required": ["ok", "color", "n", "inner", "range"],
  "additionalProperties": false
})";

void expect_fits_bounded_schema(const json& j) {
  ASSERT_TRUE(j.is_object()) << j.dump();
  ASSERT_TRUE(j.contains("ok") && j["ok"].is_boolean()) << j.dump();
  ASSERT_TRUE(j.contains("color") && j["color"].is_string()) << j.dump();
  const std::string c = j["color"];
  EXPECT_TRUE(c == "red" || c == "green" || c == "blue") << c;
  ASSERT_TRUE(j.contains("n") && j["n"].is_number_integer()) << j.dump();
  ASSERT_TRUE(j.contains("inner") && j["inner"].is_object()) << j.dump();
  EXPECT_TRUE(j["inner"]["z"].is_null());
  EXPECT_EQ(j["inner"]["k"], 7);
  EXPECT_EQ(j["inner"].size(), 2u);
  ASSERT_TRUE(j.contains("range") && j["range"].is_number_integer()) << j.dump();
  EXPECT_GE(j["range"].get<int64_t>(), 10) << j.dump();
  EXPECT_LE(j["range"].get<int64_t>(), 99) << j.dump();
  if (j.contains("maybe")) {
    EXPECT_TRUE(j["maybe"].is_boolean()) << j.dump();
  }
  if (j.contains("pick")) {
    EXPECT_TRUE(j["pick"].is_null() || j["pick"].is_boolean()) << j.dump();
  }
  if (j.contains("pair")) {
    const json& p = j["pair"];
    ASSERT_TRUE(p.is_array() && p.size() == 2) << j.dump();
    EXPECT_TRUE(p[0].is_boolean()) << j.dump();
    EXPECT_TRUE(p[1].is_null() || (p[1].is_number_integer() && p[1].get<int64_t>() <= -3)) << j.dump();
  }
  if (j.contains("day")) {
    ASSERT_TRUE(j["day"].is_string()) << j.dump();
    EXPECT_TRUE(std::regex_match(j["day"].get<std::string>(), std::regex(R"(\d{4}-\d\d-\d\d)"))) << j.dump();
  }
  for (const auto& [k, v] : j.items()) {
    const std::set<std::string> keys = {"ok", "color", "n", "inner", "range", "maybe", "pick", "pair", "day"};
    EXPECT_TRUE(keys.contains(k)) << "unexpected key " << k;
  }
}

// Text the grammar allowed but max_tokens cut: must be a prefix of a valid document, i.e. the parser
// fails only at the end of the input.
void expect_json_prefix(const std::string& text) {
  try {
    const json parsed = json::parse(text);
    (void)parsed;
  } catch (const json::parse_error& e) {
    EXPECT_GE(e.byte, text.size()) << "invalid JSON before the end: " << e.what() << "\n" << text;
  }
}

TEST(JsonGrammar, ObjectGrammarText) {
  auto r = json_object_grammar();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const std::string& g = *r;
  EXPECT_EQ(rule(g, "root"), "object") << g;
  EXPECT_TRUE(contains(rule(g, "object"), "\"{\" space")) << g;
  // Whitespace and digits are bounded: no rule repeats them without end.
  const std::string space = rule(g, "space");
  EXPECT_NE(space, "<missing>") << g;
  EXPECT_EQ(space.find_first_of("*+"), std::string::npos) << "whitespace is unbounded: " << space;
  EXPECT_TRUE(contains(rule(g, "integral-part"), "[1-9] [0-9]{0,15}")) << g;
  EXPECT_EQ(rule(g, "integral-part").find_first_of("*+"), std::string::npos) << g;
  EXPECT_EQ(rule(g, "decimal-part"), "[0-9]{1,16}") << g;
}

TEST(JsonGrammar, SchemaGrammarText) {
  // Required members in `properties` order (llama.cpp's), then the optional one.
  const std::string g = grammar_ok(R"({"type":"object",
      "properties":{"b":{"type":"string"},"a":{"type":"integer"},"c":{"type":"boolean"}},
      "required":["a","b"]})");
  EXPECT_EQ(rule(g, "root"), "\"{\" space b-kv \",\" space a-kv ( \",\" space ( c-kv ) )? space \"}\"") << g;
  EXPECT_EQ(rule(g, "c-kv"), "\"\\\"c\\\"\" space \":\" space boolean") << g;

  EXPECT_EQ(rule(grammar_ok(R"({"enum":["x\"y", 3, null, true]})"), "root"),
            "(\"\\\"x\\\\\\\"y\\\"\" | \"3\" | \"null\" | \"true\")");
  EXPECT_EQ(rule(grammar_ok(R"({"const":{"k":[1,2]}})"), "root"), "\"{\\\"k\\\":[1,2]}\"");
  EXPECT_EQ(rule(grammar_ok(R"({"type":["string","null"]})"), "root"), "string | null");
  EXPECT_EQ(rule(grammar_ok(R"({"type":"string","minLength":2,"maxLength":5})"), "root"),
            "\"\\\"\" char{2,5} \"\\\"\"");
  EXPECT_TRUE(contains(rule(grammar_ok(R"({"type":"string","minLength":1})"), "root"), "char+"));
  EXPECT_TRUE(contains(rule(grammar_ok(R"({"type":"array","items":{"type":"number"}})"), "root"),
                       "(number (\",\" space number)*)?"));
  EXPECT_EQ(rule(grammar_ok("{}"), "root"), "value");
  EXPECT_EQ(rule(grammar_ok("true"), "root"), "value") << "true is {} (llama.cpp takes objects only)";
  EXPECT_EQ(rule(grammar_ok(R"({"type":"object"})"), "root"), "object");
  EXPECT_EQ(rule(grammar_ok(R"({"title":"T","description":"d","type":"integer"})"), "root"),
            "(\"-\"? integral-part)");
  // Only optional members: the first present one needs no comma before it.
  const std::string o = grammar_ok(R"({"properties":{"p":{"type":"null"},"q":{"type":"null"}}})");
  EXPECT_EQ(rule(o, "root"), "\"{\" space  (p-kv p-rest | q-kv )? space \"}\"") << o;
  EXPECT_EQ(rule(o, "p-rest"), "( \",\" space q-kv )?") << o;
  // A recursive $ref becomes a recursive rule.
  const std::string r = grammar_ok(
      R"({"$defs":{"node":{"type":"object","properties":{"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}}}},
          "$ref":"#/$defs/node"})");
  EXPECT_EQ(rule(r, "root"), "ref-defs-node") << r;
  EXPECT_EQ(rule(r, "ref-defs-node-next-0"), "ref-defs-node") << r;
  // What llama.cpp applies beyond the subset of our old converter: integer ranges, formats, tuples and
  // item counts.
  EXPECT_EQ(rule(grammar_ok(R"({"type":"integer","minimum":10,"maximum":99})"), "root"),
            "(([1-8] [0-9] | [9] [0-9]))");
  EXPECT_EQ(rule(grammar_ok(R"({"type":"integer","exclusiveMinimum":0})"), "root"), "([1-9] [0-9]{0,15})");
  EXPECT_EQ(rule(grammar_ok(R"({"type":"string","format":"date"})"), "root"), "date-string");
  EXPECT_TRUE(
      contains(rule(grammar_ok(R"({"type":"string","format":"uuid"})"), "root"), "[0-9a-fA-F]{8} \"-\""));
  EXPECT_EQ(rule(grammar_ok(R"({"prefixItems":[{"type":"boolean"},{"type":"null"}]})"), "root"),
            "\"[\" space boolean \",\" space null space \"]\"");
  EXPECT_EQ(
      rule(grammar_ok(R"({"type":"array","items":{"type":"boolean"},"minItems":1,"maxItems":3})"), "root"),
      "\"[\" space boolean (\",\" space boolean){0,2} space \"]\"");
  // "additionalProperties": true allows what an object allows anyway: no rule for extra keys.
  const std::string extra =
      grammar_ok(R"({"type":"object","properties":{"a":{}},"additionalProperties":true})");
  EXPECT_EQ(rule(extra, "root"), "\"{\" space  (a-kv )? space \"}\"") << extra;
  EXPECT_FALSE(contains(extra, "additional")) << extra;
  EXPECT_EQ(rule(grammar_ok(R"({"type":"object","additionalProperties":false})"), "root"),
            "\"{\" space \"}\"");
  // A keyword for values the subschema does not generate constrains nothing.
  EXPECT_EQ(rule(grammar_ok(R"({"type":"string","minItems":4})"), "root"), "\"\\\"\" char* \"\\\"\"");
  EXPECT_EQ(rule(grammar_ok(R"({"type":"integer","format":"int32"})"), "root"), "(\"-\"? integral-part)");
}

TEST(JsonGrammar, UnsupportedSchemasAreRefusedByName) {
  expect_refused(R"({"type":"object","properties":{"name":{"type":"string","pattern":"^a"}}})",
                 "unsupported JSON schema keyword 'pattern' at '/properties/name'");
  expect_refused(R"({"type":"number","minimum":0})", "'minimum' at the schema root for number values");
  expect_refused(R"({"type":["integer","number"],"maximum":0})", "'maximum' at the schema root for number");
  expect_refused(R"({"enum":[1,5],"minimum":3})", "'minimum' at the schema root for enum or const values");
  expect_refused(R"({"minItems":2})", "'minItems' at the schema root for any values");
  expect_refused(R"({"required":["a"]})", "'required' at the schema root for any values");
  expect_refused(R"({"oneOf":[{"type":"null"}]})", "'oneOf'");
  expect_refused(R"({"allOf":[{"type":"string"}]})", "'allOf'");
  expect_refused(R"({"not":{"type":"string"}})", "'not'");
  expect_refused(R"({"type":"date"})", "unknown type 'date'");
  expect_refused(R"({"type":["string","string"]})", "lists 'string' twice");
  expect_refused(R"({"type":"string","enum":["a",1]})",
                 "'enum' at the schema root has 1, which is not of its 'type'");
  expect_refused(R"({"type":"object","properties":{"a":{}},"required":["b"]})",
                 "\"b\", which is not in its 'properties'");
  expect_refused(R"({"type":"object","required":["b"]})", "it has no 'properties'");
  expect_refused(R"({"type":"object","additionalProperties":{"type":"string"}})", "'additionalProperties'");
  expect_refused(R"({"$ref":"#/components/x"})", "does not name an entry");
  expect_refused(R"({"$ref":"#/$defs/missing","$defs":{}})", "does not name an entry");
  expect_refused(R"({"$ref":"#/$defs/a/b","$defs":{"a/b":{}}})", "does not name an entry");
  expect_refused(R"({"$ref":"#/$defs/a","type":"object","$defs":{"a":{}}})", "'$ref' together with 'type'");
  expect_refused(R"({"prefixItems":[{"type":"string"}],"items":{"type":"integer"}})",
                 "'items' together with 'prefixItems'");
  expect_refused(R"({"prefixItems":[{}],"minItems":2})", "does not admit the 1 items of its tuple");
  expect_refused(R"({"enum":[]})", "non-empty array");
  expect_refused(R"({"anyOf":[{"type":"null"}],"type":"object"})", "'anyOf' together with 'type'");
  expect_refused(R"({"type":"string","minLength":5,"maxLength":2})", "below 'minLength'");
  expect_refused(R"({"type":"array","minItems":5,"maxItems":2})", "below 'minItems'");
  expect_refused(R"({"type":"array","maxItems":2001})",
                 "'maxItems' at the schema root must be an integer in 0..2000");
  expect_refused(R"({"type":"string","format":"email"})", "'format' \"email\"");
  expect_refused(R"({"format":"email"})", "'format' at the schema root for any values");
  expect_refused(R"({"type":"string","format":"date","maxLength":3})", "'format' together with 'maxLength'");
  expect_refused(R"({"type":"integer","minimum":5,"maximum":1})", "no integer is within");
  expect_refused(R"({"type":"integer","minimum":1e300})", "between -1e15 and 1e15");
  expect_refused(R"({"type":"integer","exclusiveMinimum":true})",
                 "'exclusiveMinimum' at the schema root must be a number");
  expect_refused(R"({"type":"integer","minimum":0,"exclusiveMinimum":0})",
                 "'minimum' together with 'exclusiveMinimum'");
  expect_refused("false", "accepts no value");
  expect_refused(R"({"type":"array","items":false})", "'false' at '/items' accepts no value");
  expect_refused("[1]", "must be an object or a boolean");
  expect_refused("{not json", "not valid JSON");
}

TEST(JsonGrammar, LlamaCppErrorsBecomeInvalidArgument) {
  // llama.cpp's converter alone throws on what our checks refuse first; its message comes back.
  using J = nlohmann::ordered_json;
  for (const auto& [schema, phrase] : std::vector<std::pair<J, std::string>>{
           {J{{"type", "date"}}, "unrecognized type date"},
           {J(true), "schema must be an object"},
           {J{{"type", "string"}, {"pattern", "^(a$"}}, "unbalanced parentheses"}}) {
    auto g = detail::llama_cpp_schema_grammar(schema);
    ASSERT_FALSE(g.ok()) << schema.dump();
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(contains(g.status().message(), "llama.cpp could not convert the JSON schema: "))
        << g.status().message();
    EXPECT_TRUE(contains(g.status().message(), phrase)) << g.status().message();
    EXPECT_FALSE(contains(g.status().message(), "\n")) << g.status().message();
  }
  EXPECT_TRUE(schema_grammar(J(true)).ok()) << "true is {} by the time llama.cpp sees it";
}

// An object of `n` boolean properties named p0, p1, ...; all required or all optional.
std::string wide_object(size_t n, bool required, const std::string& prefix = "p") {
  json s = {{"type", "object"}, {"properties", json::object()}};
  json names = json::array();
  for (size_t i = 0; i < n; ++i) {
    s["properties"][prefix + std::to_string(i)] = {{"type", "boolean"}};
    names.push_back(prefix + std::to_string(i));
  }
  if (required) s["required"] = names;
  return s.dump();
}

json enum_of(size_t n, const std::string& prefix = "v") {
  json values = json::array();
  for (size_t i = 0; i < n; ++i) values.push_back(prefix + std::to_string(i));
  return {{"enum", values}};
}

TEST(JsonGrammar, SchemasAreBoundedInSize) {
  // Alternatives at one point: optional properties of one object, values of one enum, anyOf branches,
  // type-array entries.
  grammar_ok(wide_object(kMaxSchemaAlternatives, false));
  expect_refused(wide_object(kMaxSchemaAlternatives + 1, false),
                 "'properties' (the optional ones) at the schema root offers more than 128 alternatives at "
                 "one point (at most 128;");
  grammar_ok(enum_of(kMaxSchemaAlternatives).dump());
  expect_refused(enum_of(kMaxSchemaAlternatives + 1).dump(),
                 "'enum' at the schema root offers more than 128");
  // Nested enums and anyOfs add up, through $ref and type arrays too.
  expect_refused(json{{"anyOf", {enum_of(100, "a"), enum_of(100, "b")}}}.dump(),
                 "'anyOf' at the schema root");
  expect_refused(json{{"$defs", {{"e", enum_of(100)}}},
                      {"type", "object"},
                      {"properties", {{"x", {{"anyOf", {{{"$ref", "#/$defs/e"}}, enum_of(100, "b")}}}}}}}
                     .dump(),
                 "'anyOf' at '/properties/x' offers more than 128");
  json typed_enum = enum_of(100);
  typed_enum["type"] = {"string", "null"};  // llama.cpp repeats the enum for each type
  expect_refused(typed_enum.dump(), "'type' at the schema root offers more than 128");
  grammar_ok(json{{"anyOf", {enum_of(64, "a"), enum_of(64, "b")}}}.dump());
  // Subschemas in all (the root is one).
  grammar_ok(wide_object(kMaxSchemaNodes - 1, true));
  expect_refused(wide_object(kMaxSchemaNodes, true), "more than 1024 subschemas");
  // Type arrays of structured types nested (each entry is one).
  json nest = {{"type", "string"}};
  for (int i = 0; i < 10; ++i)
    nest = json{{"type", {"object", "array", "null"}}, {"properties", {{"a", nest}}}, {"items", nest}};
  expect_refused(nest.dump(), "more than 1024 subschemas");
  // Enum values in all.
  json enums = {{"type", "object"}, {"properties", json::object()}};
  for (size_t k = 0; k <= kMaxSchemaEnumValues / kMaxSchemaAlternatives; ++k)
    enums["properties"]["e" + std::to_string(k)] = enum_of(kMaxSchemaAlternatives);
  expect_refused(enums.dump(), "more than 1024 enum values in all");
  // Object members, bounded before the schema is parsed (ordered_json parses in quadratic time).
  expect_refused(wide_object(20000, false), "the JSON schema: a JSON object has more than 1024 members");
  json annotated = {{"type", "object"}, {"properties", json::object()}};
  for (size_t k = 0; k < 20; ++k) {
    json big = json::object();
    for (size_t i = 0; i < 1000; ++i) big["k" + std::to_string(i)] = i;
    annotated["properties"]["p" + std::to_string(k)] = {{"type", "object"}, {"default", big}};
  }
  expect_refused(annotated.dump(), "JSON objects have more than 16384 members in all");
  // The same bounds for a schema given parsed.
  nlohmann::ordered_json members = nlohmann::ordered_json::object();
  for (size_t i = 0; i <= kMaxSchemaNodes; ++i) members["k" + std::to_string(i)] = i;
  auto wide = schema_grammar({{"type", "object"}, {"default", members}});
  ASSERT_FALSE(wide.ok());
  EXPECT_TRUE(contains(wide.status().message(), "a JSON object has more than 1024 members"))
      << wide.status().message();
  nlohmann::ordered_json deep_parsed = nlohmann::ordered_json::array();
  for (int i = 0; i < 100; ++i) deep_parsed = nlohmann::ordered_json::array({deep_parsed});
  auto too_deep = schema_grammar({{"default", deep_parsed}});
  ASSERT_FALSE(too_deep.ok());
  EXPECT_TRUE(contains(too_deep.status().message(), "nests deeper than 64 levels"))
      << too_deep.status().message();
  // The schema's text.
  expect_refused(json{{"description", std::string(kMaxSchemaBytes, 'd')}}.dump(), "its JSON takes");
  // The grammar text: refused from what the schema's consts, enum values and names take at least,
  // before llama.cpp's converter runs...
  expect_refused(json{{"const", std::string(kMaxGrammarBytes, 'x')}}.dump(),
                 "its grammar would take at least");
  // ... and from the grammar it wrote (each quote of a const is 2 bytes of schema, 4 of grammar).
  auto quotes = json_schema_grammar(json{{"const", std::string(kMaxGrammarBytes / 3, '"')}}.dump());
  ASSERT_FALSE(quotes.ok());
  EXPECT_TRUE(contains(quotes.status().message(), "the JSON schema is too large: its grammar would take 3"))
      << quotes.status().message();
  // Nesting is bounded by the JSON depth limit, before any conversion (a 20,000-deep "items" took 81 s).
  std::string deep;
  for (int i = 0; i < 20000; ++i) deep += R"({"type":"array","items":)";
  deep += "{}" + std::string(20000, '}');
  expect_refused(deep, "the JSON schema: JSON nests deeper than 64 levels");
  // Repetitions: llama.cpp's grammar repeats an item at most 2000 times.
  grammar_ok(R"({"type":"string","minLength":2000})");
  expect_refused(R"({"type":"string","minLength":2001})", "0..2000");
}

TEST(JsonGrammar, HugeOrSimilarNamesStayLinear) {
  // 1,000 properties whose names llama.cpp rewrites to similar rule names ('!' is not allowed in one).
  json same = {{"type", "object"}, {"properties", json::object()}, {"required", json::array()}};
  for (size_t i = 0; i < 1000; ++i) {
    const std::string name = std::string(60, '!') + std::to_string(i);
    same["properties"][name] = {{"type", "string"}, {"maxLength", 3}};
    same["required"].push_back(name);
  }
  const std::string g = grammar_ok(same.dump());
  for (size_t i = 0; i < 1000; i += 37) {
    EXPECT_TRUE(contains(g, "\"\\\"" + std::string(60, '!') + std::to_string(i) + "\\\"\" space \":\" space"))
        << i;
  }
  size_t kv = 0;
  for (size_t at = 0; (at = g.find("-kv ::= ", at)) != std::string::npos; ++at) ++kv;
  EXPECT_EQ(kv, 1000u) << "one rule per property";
  // A 100 KB key, nested: refused before llama.cpp names rules after it, with a short message.
  const std::string key(100000, 'k');
  json nested = {
      {"type", "object"},
      {"properties", {{key, {{"type", "object"}, {"properties", {{key, {{"type", "string"}}}}}}}}}};
  auto r = json_schema_grammar(nested.dump());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.status().message(), "the property names on the way to")) << r.status().message();
  EXPECT_LT(r.status().message().size(), 600u);
  // llama.cpp builds the rules of optional properties in time cubic in their number: 128 of them with
  // 1,000-byte names took 0.2 s and are refused before its converter runs.
  json slow = {{"type", "object"}, {"properties", json::object()}};
  for (size_t i = 0; i < kMaxSchemaAlternatives; ++i)
    slow["properties"][std::to_string(i) + std::string(1000, '!')] = {{"type", "null"}};
  const auto t0 = std::chrono::steady_clock::now();
  expect_refused(slow.dump(), "have too long names for their number");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.1)
      << "refused only after a slow conversion";
  // At the bound it is accepted.
  json at_bound = {{"type", "object"}, {"properties", json::object()}};
  for (size_t i = 0; i < kMaxSchemaAlternatives; ++i)
    at_bound["properties"][std::to_string(1000 + i) + std::string(28, '!')] = {{"type", "null"}};
  grammar_ok(at_bound.dump());
}

TEST(JsonGrammar, GrammarForConstraintKinds) {
  OutputConstraint none;
  auto g = grammar_for(none);
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(g->empty());
  OutputConstraint obj{OutputConstraint::Kind::kJsonObject, ""};
  EXPECT_EQ(*grammar_for(obj), *json_object_grammar());
  OutputConstraint bad{OutputConstraint::Kind::kJsonSchema, R"({"format":"email"})"};
  EXPECT_FALSE(grammar_for(bad).ok());
  OutputConstraint schema{OutputConstraint::Kind::kJsonSchema, R"({"type":"boolean"})"};
  ASSERT_TRUE(grammar_for(schema).ok());
  EXPECT_EQ(rule(*grammar_for(schema), "root"), "(\"true\" | \"false\")");
}

TEST(JsonGrammar, LlamaCppAcceptsEveryGrammarWeWrite) {
  GANTRY_REQUIRE_TINY_MODEL();
  std::vector<std::string> grammars = {
      *json_object_grammar(), grammar_ok(kBoundedSchema), grammar_ok(R"({"enum":["x\"y\\z\n", 3.5, null]})"),
      grammar_ok(R"({"type":"array","items":{"type":"string","maxLength":3}})"),
      grammar_ok(R"({"properties":{"ключ":{"const":"значение"}}})"),
      grammar_ok(R"({"definitions":{"a":{"type":["integer","string"]}},
                                                     "type":"array","items":{"$ref":"#/definitions/a"}})"),
      grammar_ok(
          R"({"properties":{"a]\\^\"":{"type":"integer","minimum":-7,"maximum":12345}},"required":["a]\\^\""]})"),
      grammar_ok(R"({"type":"string","format":"date-time"})"),
      grammar_ok(R"({"type":"string","format":"time"})"),
      grammar_ok(R"({"type":"array","items":{"type":"null"},"minItems":2000})"),
      grammar_ok(R"({"items":[{"type":"boolean"},{"enum":[1,2]}]})"),
      // The largest accepted schemas.
      grammar_ok(wide_object(kMaxSchemaAlternatives, false)),
      grammar_ok(wide_object(kMaxSchemaNodes - 1, true)), grammar_ok(enum_of(kMaxSchemaAlternatives).dump())};
  for (const auto& g : grammars) {
    llama_sampler* s = llama_sampler_init_grammar(weights->vocab(), g.c_str(), "root");
    EXPECT_NE(s, nullptr) << "llama.cpp rejected:\n" << g.substr(0, 3000);
    if (s) llama_sampler_free(s);
  }
}

ContextOptions ctx_options() {
  ContextOptions o;
  o.n_ctx = 4096;  // 2048 per sequence
  o.n_seq_max = 2;
  o.n_threads = 1;
  o.threadpool = false;
  return o;
}

GenerationRequest constrained(OutputConstraint c, float temperature, uint32_t seed, int max_tokens) {
  GenerationRequest r;
  r.prompt = "Reply in JSON:";
  r.max_tokens = max_tokens;
  r.sampling.temperature = temperature;
  r.sampling.seed = seed;
  r.sampling.repeat_penalty = 1.1f;  // the penalty sees the prompt; the grammar must not
  r.constraint = std::move(c);
  return r;
}

// The longest document kBoundedSchema allows is under 1,100 bytes (35 places for whitespace of at most
// 22 bytes each, llama.cpp's `space`, and ~250 of values), and every token adds a byte.
constexpr int kBoundedMaxTokens = 1500;

TEST(JsonGrammar, GeneratesSchemaValidJson) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = BatchEngine::create(weights, ctx_options());
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  const OutputConstraint c{OutputConstraint::Kind::kJsonSchema, kBoundedSchema};
  struct Case {
    float temperature;
    uint32_t seed;
  };
  for (const Case& k : {Case{0.0f, 0}, Case{0.8f, 1}, Case{0.8f, 2}, Case{1.5f, 3}}) {
    SCOPED_TRACE("temperature " + std::to_string(k.temperature) + " seed " + std::to_string(k.seed));
    auto r = (*e)->generate(constrained(c, k.temperature, k.seed, kBoundedMaxTokens));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_EQ(r->finish, FinishReason::kEndOfGeneration) << "a complete document ends the generation:\n"
                                                         << r->text;
    json j;
    ASSERT_NO_THROW(j = json::parse(r->text)) << r->text;
    expect_fits_bounded_schema(j);
    std::printf("schema, temperature %.1f seed %u: %s\n", k.temperature, k.seed, r->text.c_str());
  }
}

TEST(JsonGrammar, GeneratesJsonObjects) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = BatchEngine::create(weights, ctx_options());
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  const OutputConstraint c{OutputConstraint::Kind::kJsonObject, ""};
  int complete = 0;
  // A random model rarely closes an unbounded object soon: most runs end at max_tokens, and then
  // the text must be a valid prefix (each token costs a grammar pass over the 32k vocabulary). With
  // the prompt "{" some seeded runs close at once ("{}"); at least one of these must complete.
  struct Case {
    const char* prompt;
    float temperature;
    uint32_t seed;
  };
  const Case cases[] = {{"Reply in JSON:", 0.0f, 0},
                        {"Reply in JSON:", 0.9f, 1},
                        {"{", 1.0f, 12},
                        {"{", 1.0f, 13},
                        {"{", 1.0f, 14},
                        {"{", 1.0f, 15}};
  for (const Case& k : cases) {
    SCOPED_TRACE(std::string(k.prompt) + " seed " + std::to_string(k.seed));
    GenerationRequest req = constrained(c, k.temperature, k.seed, 32);
    req.prompt = k.prompt;
    auto r = (*e)->generate(req);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_FALSE(r->text.empty());
    EXPECT_EQ(r->text[0], '{') << r->text;
    if (r->finish == FinishReason::kEndOfGeneration) {
      ++complete;
      json j;
      ASSERT_NO_THROW(j = json::parse(r->text)) << r->text;
      EXPECT_TRUE(j.is_object()) << r->text;
    } else {
      EXPECT_EQ(r->finish, FinishReason::kMaxTokens);
      expect_json_prefix(r->text);
    }
  }
  EXPECT_GE(complete, 1) << "no run closed its object (if llama.cpp's sampling changed, pick other seeds)";
  std::printf("json_object: %d of 6 generations completed within 32 tokens\n", complete);
}

TEST(JsonGrammar, ConstrainedAndFreeSequencesShareABatch) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = BatchEngine::create(weights, ctx_options());
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  GenerationRequest free_req;
  free_req.prompt = "Reply in JSON:";
  free_req.max_tokens = 24;
  free_req.sampling.temperature = 0;
  free_req.n_top_logits = 2;
  auto alone = (*e)->generate(free_req);
  ASSERT_TRUE(alone.ok());
  auto h1 = (*e)->submit(constrained(OutputConstraint{OutputConstraint::Kind::kJsonSchema, kBoundedSchema},
                                     0.0f, 0, kBoundedMaxTokens));
  auto h2 = (*e)->submit(free_req);
  ASSERT_TRUE(h1.ok() && h2.ok());
  auto r1 = (*e)->wait(*h1);
  auto r2 = (*e)->wait(*h2);
  ASSERT_TRUE(r1.ok() && r2.ok());
  ASSERT_EQ(r1->finish, FinishReason::kEndOfGeneration);
  expect_fits_bounded_schema(json::parse(r1->text));
  // The free sequence matches its run alone (up to a near tie of its top two logits, as batched
  // decoding may round differently): the other sequence's grammar does not leak into it.
  size_t k = 0;
  while (k < r2->tokens.size() && k < alone->tokens.size() && r2->tokens[k] == alone->tokens[k]) ++k;
  if (k < alone->tokens.size()) {
    ASSERT_LT(k, alone->top_logits.size());
    const auto& top = alone->top_logits[k];
    EXPECT_LT(top[0].second - top[1].second, 1e-3f * std::max(1.0f, std::fabs(top[0].second)))
        << "diverged at token " << k << " without a near tie";
  } else {
    EXPECT_EQ(r2->tokens.size(), alone->tokens.size());
  }
}

TEST(JsonGrammar, UnsupportedSchemaIsRefusedAtSubmit) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = BatchEngine::create(weights, ctx_options());
  ASSERT_TRUE(e.ok());
  auto h = (*e)->submit(constrained(
      OutputConstraint{OutputConstraint::Kind::kJsonSchema, R"({"type":"string","format":"uri"})"}, 0.0f, 0,
      8));
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(h.status().message(), "'format'")) << h.status().message();
  EXPECT_EQ((*e)->stats().pending, 0u);
  // Too large: refused by submit, on the caller's thread, before anything reaches the decoding loop.
  auto big = (*e)->submit(constrained(
      OutputConstraint{OutputConstraint::Kind::kJsonSchema, wide_object(kMaxSchemaAlternatives + 1, false)},
      0.0f, 0, 8));
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(big.status().message(), "the JSON schema is too large")) << big.status().message();
  EXPECT_EQ((*e)->stats().pending, 0u);
  // The engine serves on, under a schema.
  auto fine = (*e)->generate(constrained(
      OutputConstraint{OutputConstraint::Kind::kJsonSchema, R"({"type":"boolean"})"}, 0.0f, 0, 8));
  ASSERT_TRUE(fine.ok()) << fine.status().to_string();
  EXPECT_TRUE(fine->text == "true" || fine->text == "false") << fine->text;
}

}  // namespace
}  // namespace gantry::llama
