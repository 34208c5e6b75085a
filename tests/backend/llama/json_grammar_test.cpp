// JSON output constraints: the GBNF text our converter writes, its refusals, llama.cpp accepting every
// grammar it writes, and generation on the tiny model producing JSON that parses and fits the schema.
#include "gantry/backend/llama/json_grammar.h"

#include <gtest/gtest.h>
#include <llama.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
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
  EXPECT_TRUE(g.ok()) << schema << ": " << g.status().to_string();
  return g.ok() ? *g : std::string();
}

void expect_refused(const std::string& schema, const std::string& phrase) {
  auto g = json_schema_grammar(schema);
  ASSERT_FALSE(g.ok()) << schema << " was accepted:\n" << *g;
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find(phrase), std::string::npos) << g.status().message();
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A schema whose every value is bounded (booleans, enums, integers, null, const), so a generation
// with enough max_tokens always completes: the grammar then allows only end-of-generation.
const char* kBoundedSchema = R"({
  "type": "object",
  "properties": {
    "ok": {"type": "boolean"},
    "color": {"enum": ["red", "green", "blue"]},
    "n": {"type": "integer"},
    "inner": {"type": "object", "properties": {"z": {"type": "null"}, "k": {"const": 7}}, "required": ["z", "k"]},
    "maybe": {"type": "boolean"},
    "pick": {"anyOf": [{"type": "null"}, {"type": "boolean"}]}
  },
  "required": ["ok", "color", "n", "inner"],
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
  if (j.contains("maybe")) {
    EXPECT_TRUE(j["maybe"].is_boolean()) << j.dump();
  }
  if (j.contains("pick")) {
    EXPECT_TRUE(j["pick"].is_null() || j["pick"].is_boolean()) << j.dump();
  }
  for (const auto& [k, v] : j.items()) {
    EXPECT_TRUE(k == "ok" || k == "color" || k == "n" || k == "inner" || k == "maybe" || k == "pick")
        << "unexpected key " << k;
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
  const std::string g = json_object_grammar();
  EXPECT_EQ(g.rfind("root ::= object\n", 0), 0u);
  EXPECT_TRUE(contains(g, "object ::= \"{\" ws ( member ( \",\" ws member )* )? \"}\""));
  EXPECT_TRUE(contains(g, "ws ::= | \" \" | \"\\n\" \" \"{0,8}")) << "whitespace is bounded";
  EXPECT_TRUE(contains(g, "[1-9] [0-9]{0,15}")) << "integer digits are bounded";
}

TEST(JsonGrammar, SchemaGrammarText) {
  const std::string g = grammar_ok(R"({"type":"object",
      "properties":{"b":{"type":"string"},"a":{"type":"integer"},"c":{"type":"boolean"}},
      "required":["a","b"]})");
  // Required members in `required` order, then the optional one.
  EXPECT_TRUE(
      contains(g,
               "\"{\" ws \"\\\"a\\\"\" ws \":\" ws integer ws \",\" ws \"\\\"b\\\"\" ws \":\" ws string ws "
               "( \",\" ws s-root-opt-c )? \"}\""))
      << g;
  EXPECT_TRUE(contains(g, "s-root-opt-c ::= \"\\\"c\\\"\" ws \":\" ws boolean ws")) << g;

  const std::string e = grammar_ok(R"({"enum":["x\"y", 3, null, true]})");
  EXPECT_TRUE(contains(e, "root ::= (\"\\\"x\\\\\\\"y\\\"\" | \"3\" | \"null\" | \"true\")")) << e;
  EXPECT_TRUE(contains(grammar_ok(R"({"const":{"k":[1,2]}})"), "root ::= \"{\\\"k\\\":[1,2]}\""));
  EXPECT_TRUE(contains(grammar_ok(R"({"type":["string","null"]})"), "root ::= (string | null)"));
  EXPECT_TRUE(contains(grammar_ok(R"({"type":"string","minLength":2,"maxLength":5})"), "char{2,5}"));
  EXPECT_TRUE(contains(grammar_ok(R"({"type":"string","minLength":1})"), "char{1,}"));
  EXPECT_TRUE(contains(grammar_ok(R"({"type":"array","items":{"type":"number"}})"),
                       "\"[\" ws ( number ws ( \",\" ws number ws )* )? \"]\""));
  EXPECT_TRUE(contains(grammar_ok("{}"), "root ::= value"));
  EXPECT_TRUE(contains(grammar_ok("true"), "root ::= value"));
  EXPECT_TRUE(contains(grammar_ok(R"({"type":"object"})"), "root ::= object"));
  EXPECT_TRUE(
      contains(grammar_ok(R"({"title":"T","description":"d","type":"integer"})"), "root ::= integer"));
  // Only optional members: the first present one needs no comma before it.
  const std::string o = grammar_ok(R"({"properties":{"p":{"type":"null"},"q":{"type":"null"}}})");
  EXPECT_TRUE(contains(
      o, "s-root-opt-p ::= \"\\\"p\\\"\" ws \":\" ws null ws ( \",\" ws s-root-opt-q )? | s-root-opt-q"))
      << o;
  EXPECT_TRUE(contains(o, "\"{\" ws s-root-opt-p? \"}\"")) << o;
  // A recursive $ref becomes a recursive rule.
  const std::string r = grammar_ok(
      R"({"$defs":{"node":{"type":"object","properties":{"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}}}},
          "$ref":"#/$defs/node"})");
  EXPECT_TRUE(contains(r, "root ::= s-def-node\n")) << r;
  EXPECT_TRUE(contains(r, "(s-def-node | null)")) << r;
}

TEST(JsonGrammar, UnsupportedSchemasAreRefusedByName) {
  expect_refused(R"({"type":"object","properties":{"name":{"type":"string","pattern":"^a"}}})",
                 "unsupported JSON schema keyword 'pattern' at '/properties/name'");
  expect_refused(R"({"type":"number","minimum":0})", "'minimum' at the schema root");
  expect_refused(R"({"oneOf":[{"type":"null"}]})", "'oneOf'");
  expect_refused(R"({"type":"date"})", "unknown type 'date'");
  expect_refused(R"({"type":"object","properties":{"a":{}},"required":["b"]})",
                 "\"b\", which is not in its 'properties'");
  expect_refused(R"({"type":"object","additionalProperties":{"type":"string"}})", "'additionalProperties'");
  expect_refused(R"({"$ref":"#/components/x"})", "does not name an entry");
  expect_refused(R"({"$ref":"#/$defs/missing","$defs":{}})", "does not name an entry");
  expect_refused(R"({"items":[{"type":"string"}]})", "tuple arrays are not supported");
  expect_refused(R"({"enum":[]})", "non-empty array");
  expect_refused(R"({"anyOf":[{"type":"null"}],"type":"object"})", "'anyOf' together with 'type'");
  expect_refused(R"({"type":"string","minLength":5,"maxLength":2})", "below 'minLength'");
  expect_refused("false", "accepts no value");
  expect_refused("[1]", "must be an object or a boolean");
  expect_refused("{not json", "not valid JSON");
}

// An object of `n` boolean properties named p0, p1, ...; all required or all optional.
std::string wide_object(size_t n, bool required) {
  json s = {{"type", "object"}, {"properties", json::object()}};
  json names = json::array();
  for (size_t i = 0; i < n; ++i) {
    s["properties"]["p" + std::to_string(i)] = {{"type", "boolean"}};
    names.push_back("p" + std::to_string(i));
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
  // Alternatives at one point: optional properties of one object, values of one enum, anyOf branches.
  grammar_ok(wide_object(kMaxSchemaAlternatives, false));
  expect_refused(wide_object(kMaxSchemaAlternatives + 1, false),
                 "'properties' (the optional ones) at the schema root offers more than 128 alternatives at "
                 "one point (at most 128;");
  grammar_ok(enum_of(kMaxSchemaAlternatives).dump());
  expect_refused(enum_of(kMaxSchemaAlternatives + 1).dump(),
                 "'enum' at the schema root offers more than 128");
  // Nested enums and anyOfs add up, through $ref too.
  expect_refused(json{{"anyOf", {enum_of(100, "a"), enum_of(100, "b")}}}.dump(),
                 "'anyOf' at the schema root");
  expect_refused(json{{"$defs", {{"e", enum_of(100)}}},
                      {"type", "object"},
                      {"properties", {{"x", {{"anyOf", {{{"$ref", "#/$defs/e"}}, enum_of(100, "b")}}}}}}}
                     .dump(),
                 "'anyOf' at '/properties/x' offers more than 128");
  grammar_ok(json{{"anyOf", {enum_of(64, "a"), enum_of(64, "b")}}}.dump());
  // Subschemas in all (the root is one).
  grammar_ok(wide_object(kMaxSchemaNodes - 1, true));
  expect_refused(wide_object(kMaxSchemaNodes, true), "more than 1024 subschemas");
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
  // The grammar text.
  expect_refused(json{{"const", std::string(kMaxGrammarBytes, 'x')}}.dump(), "its grammar would take");
  // Nesting is bounded by the JSON depth limit, before any conversion (a 20,000-deep "items" took 81 s).
  std::string deep;
  for (int i = 0; i < 20000; ++i) deep += R"({"type":"array","items":)";
  deep += "{}" + std::string(20000, '}');
  expect_refused(deep, "the JSON schema: JSON nests deeper than 64 levels");
}

TEST(JsonGrammar, HugeOrSimilarNamesStayLinear) {
  // 1,000 properties whose rules all get the same name base ("s-root-----..."): numbered, not searched.
  json same = {{"type", "object"}, {"properties", json::object()}, {"required", json::array()}};
  for (size_t i = 0; i < 1000; ++i) {
    const std::string name = std::string(60, '!') + std::to_string(i);  // the hint keeps only the '!'s
    same["properties"][name] = {{"type", "string"}, {"maxLength", 3}};
    same["required"].push_back(name);
  }
  const std::string g = grammar_ok(same.dump());
  std::set<std::string> names;
  size_t rules = 0;
  for (size_t at = 0; (at = g.find(" ::= \"\\\"\" char{0,3}", at)) != std::string::npos; ++at, ++rules) {
    const size_t line = g.rfind('\n', at) + 1;
    names.insert(g.substr(line, at - line));
  }
  EXPECT_EQ(rules, 1000u);
  EXPECT_EQ(names.size(), 1000u) << "rule names must stay unique";
  // A 100 KB key, nested: rule names and error pointers stay short.
  const std::string key(100000, 'k');
  json nested = {{"type", "object"},
                 {"properties", {{key, {{"type", "object"}, {"properties", {{key, {{"type", "date"}}}}}}}}}};
  auto r = json_schema_grammar(nested.dump());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown type 'date'"), std::string::npos);
  EXPECT_LT(r.status().message().size(), 600u);
}

TEST(JsonGrammar, GrammarForConstraintKinds) {
  OutputConstraint none;
  auto g = grammar_for(none);
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(g->empty());
  OutputConstraint obj{OutputConstraint::Kind::kJsonObject, ""};
  EXPECT_EQ(*grammar_for(obj), json_object_grammar());
  OutputConstraint bad{OutputConstraint::Kind::kJsonSchema, R"({"format":"email"})"};
  EXPECT_FALSE(grammar_for(bad).ok());
}

TEST(JsonGrammar, LlamaCppAcceptsEveryGrammarWeWrite) {
  GANTRY_REQUIRE_TINY_MODEL();
  std::vector<std::string> grammars = {
      json_object_grammar(), grammar_ok(kBoundedSchema), grammar_ok(R"({"enum":["x\"y\\z\n", 3.5, null]})"),
      grammar_ok(R"({"type":"array","items":{"type":"string","maxLength":3}})"),
      grammar_ok(R"({"properties":{"ключ":{"const":"значение"}}})"),
      grammar_ok(R"({"definitions":{"a":{"type":["integer","string"]}},
                                                     "type":"array","items":{"$ref":"#/definitions/a"}})"),
      // The largest accepted schemas.
      grammar_ok(wide_object(kMaxSchemaAlternatives, false)),
      grammar_ok(wide_object(kMaxSchemaNodes - 1, true)), grammar_ok(enum_of(kMaxSchemaAlternatives).dump())};
  for (const auto& g : grammars) {
    llama_sampler* s = llama_sampler_init_grammar(weights->vocab(), g.c_str(), "root");
    EXPECT_NE(s, nullptr) << "llama.cpp rejected:\n" << g;
    if (s) llama_sampler_free(s);
  }
}

ContextOptions ctx_options() {
  ContextOptions o;
  o.n_ctx = 1024;
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
    // The longest document this schema allows is well under 400 tokens (every token adds a byte).
    auto r = (*e)->generate(constrained(c, k.temperature, k.seed, 400));
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
  auto h1 = (*e)->submit(
      constrained(OutputConstraint{OutputConstraint::Kind::kJsonSchema, kBoundedSchema}, 0.0f, 0, 400));
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
}

}  // namespace
}  // namespace gantry::llama
