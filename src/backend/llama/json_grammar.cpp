#include "gantry/backend/llama/json_grammar.h"

#include <json-schema-to-grammar.h>

#include <exception>

#include "backend/llama/schema_bounds.h"
#include "gantry/core/json.h"

namespace gantry::llama {

namespace {

using Json = nlohmann::ordered_json;

Status too_large(const std::string& what, size_t limit) {
  return InvalidArgument("the JSON schema is too large: " + what + " (at most " + std::to_string(limit) +
                         "; a larger schema would make its grammar slow to build and to apply)");
}

Status schema_too_long(size_t bytes) {
  return too_large("its JSON takes " + std::to_string(bytes) + " bytes", kMaxSchemaBytes);
}

// llama.cpp's message on one line, cut short (it may quote the schema).
std::string one_line(std::string_view what) {
  constexpr size_t kMaxChars = 300;
  std::string out;
  for (char c : what.substr(0, kMaxChars)) out += c == '\n' ? ' ' : c;
  if (what.size() > kMaxChars) out += "...";
  return out;
}

}  // namespace

namespace detail {

Result<std::string> llama_cpp_schema_grammar(const Json& schema) {
  try {
    // force_gbnf: a GBNF grammar even in a llama.cpp built with llguidance.
    return json_schema_to_grammar(
        common_json::parse(schema.dump(-1, ' ', false, Json::error_handler_t::replace)), /*force_gbnf=*/true);
  } catch (const std::exception& e) {
    return InvalidArgument("llama.cpp could not convert the JSON schema: " + one_line(e.what()));
  } catch (...) {
    return InvalidArgument("llama.cpp could not convert the JSON schema");
  }
}

}  // namespace detail

Result<std::string> schema_grammar(const Json& schema) {
  Json checked = schema;
  GANTRY_RETURN_IF_ERROR(check_schema(checked));
  const size_t bytes = checked.dump(-1, ' ', false, Json::error_handler_t::replace).size();
  if (bytes > kMaxSchemaBytes) return schema_too_long(bytes);
  GANTRY_ASSIGN_OR_RETURN(std::string grammar, detail::llama_cpp_schema_grammar(checked));
  if (grammar.size() > kMaxGrammarBytes) {
    return too_large("its grammar would take " + std::to_string(grammar.size()) + " bytes", kMaxGrammarBytes);
  }
  return grammar;
}

Result<std::string> json_schema_grammar(std::string_view schema_json) {
  if (schema_json.size() > kMaxSchemaBytes) return schema_too_long(schema_json.size());
  JsonShapeLimits limits = client_json_limits(schema_json);
  limits.max_object_members = kMaxSchemaNodes;
  limits.max_members = kMaxSchemaMembers;
  GANTRY_ASSIGN_OR_RETURN(const Json schema, parse_json<Json>(schema_json, "the JSON schema", limits));
  return schema_grammar(schema);
}

Result<std::string> json_object_grammar() {
  static const Result<std::string> grammar = schema_grammar(Json{{"type", "object"}});
  return grammar;
}

Result<std::string> grammar_for(const backend::OutputConstraint& c) {
  switch (c.kind) {
    case backend::OutputConstraint::Kind::kNone:
      return std::string();
    case backend::OutputConstraint::Kind::kJsonObject:
      return json_object_grammar();
    case backend::OutputConstraint::Kind::kJsonSchema:
      return json_schema_grammar(c.json_schema);
    case backend::OutputConstraint::Kind::kGrammar:
      if (c.grammar.size() > kMaxGrammarBytes) {
        return InvalidArgument("the grammar takes " + std::to_string(c.grammar.size()) + " bytes (at most " +
                               std::to_string(kMaxGrammarBytes) + ")");
      }
      return c.grammar;
  }
  return InvalidArgument("unknown output constraint kind");
}

}  // namespace gantry::llama
