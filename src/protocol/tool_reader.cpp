#include "gantry/protocol/tool_reader.h"

#include <string>

#include "gantry/core/json.h"

namespace gantry::protocol {
namespace {
using nlohmann::json;

std::string type_of(const json& v) { return v.type_name(); }

// A client's string in a message: quoted and cut to a readable length.
std::string quoted_value(const json& v) {
  std::string text = v.is_string() ? v.get<std::string>() : v.dump();
  if (text.size() > 60) text = text.substr(0, 60) + "...";
  return "\"" + text + "\"";
}

JsonFieldCheck read_one(const json& tool, const std::string& path, const ToolLayout& layout,
                        backend::ToolDefinition& d) {
  if (!tool.is_object())
    return JsonFieldError{path, "must be an object " + std::string(layout.shape) + ", got " + type_of(tool)};
  const json* type = json_field(tool, "type");
  if ((type || layout.type_required) && !(type && type->is_string() && *type == layout.type)) {
    std::string problem = "must be \"" + std::string(layout.type) + "\"";
    if (!layout.type_required) problem += " or absent";
    if (type) problem += ", got " + quoted_value(*type);
    problem += ": other tool types are not supported (a model here calls only functions the client runs)";
    return JsonFieldError{path + ".type", std::move(problem)};
  }
  const json* facts = &tool;
  std::string at = path + ".";
  if (!layout.wrapper.empty()) {
    facts = json_field(tool, layout.wrapper);
    if (!facts || !facts->is_object()) {
      return JsonFieldError{path + "." + std::string(layout.wrapper),
                            "must be an object {name, description, " + std::string(layout.schema_key) +
                                "}, got " + (facts ? type_of(*facts) : std::string("nothing"))};
    }
    at += std::string(layout.wrapper) + ".";
  }
  const json* name = json_field(*facts, "name");
  if (!name || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return JsonFieldError{at + "name", "must be a non-empty string (the function's name; it is required)" +
                                           (name ? ", got " + type_of(*name) : std::string())};
  }
  d.name = name->get<std::string>();
  if (JsonFieldCheck e = read_json_string(*facts, "description", at, d.description)) return e;
  const json* schema = json_field(*facts, layout.schema_key);
  if (schema) {
    if (!schema->is_object()) {
      return JsonFieldError{at + std::string(layout.schema_key),
                            "must be a JSON schema object, got " + type_of(*schema)};
    }
    d.parameters = dump_json(*schema);
  } else if (layout.schema_required) {
    return JsonFieldError{at + std::string(layout.schema_key),
                          "is required: a JSON schema object for the function's arguments"};
  }
  return std::nullopt;
}
}  // namespace

JsonFieldCheck read_tools(const json& obj, const ToolLayout& layout,
                          std::vector<backend::ToolDefinition>& out) {
  const json* tools = json_field(obj, "tools");
  if (!tools) return std::nullopt;
  if (!tools->is_array()) {
    return JsonFieldError{
        "tools", "must be an array of tools " + std::string(layout.shape) + ", got " + type_of(*tools)};
  }
  std::vector<backend::ToolDefinition> read;
  read.reserve(tools->size());
  for (size_t i = 0; i < tools->size(); ++i) {
    backend::ToolDefinition d;
    if (JsonFieldCheck e = read_one((*tools)[i], "tools[" + std::to_string(i) + "]", layout, d)) return e;
    read.push_back(std::move(d));
  }
  for (auto& d : read) out.push_back(std::move(d));
  return std::nullopt;
}

JsonFieldCheck read_tool_choice(const json& obj, const ToolLayout& layout, backend::ChatRequest& r) {
  const json* tc = json_field(obj, "tool_choice");
  if (!tc) return std::nullopt;
  const std::string named = layout.wrapper.empty()
                                ? "{\"type\": \"function\", \"name\": ...}"
                                : "{\"type\": \"function\", \"function\": {\"name\": ...}}";
  if (tc->is_string()) {
    const auto choice = backend::parse_tool_choice(tc->get_ref<const std::string&>());
    if (!choice) {
      return JsonFieldError{"tool_choice", "must be \"auto\", \"none\", \"required\" or " + named + ", got " +
                                               quoted_value(*tc)};
    }
    r.tool_choice = *choice;
    return std::nullopt;
  }
  const json* type = tc->is_object() ? json_field(*tc, "type") : nullptr;
  const json* facts = tc;
  if (tc->is_object() && !layout.wrapper.empty()) facts = json_field(*tc, layout.wrapper);
  const json* name = facts && facts->is_object() ? json_field(*facts, "name") : nullptr;
  // Chat completions' clients often leave out "type" beside "function"; Responses' form has only it.
  const bool type_ok = type ? *type == "function" : !layout.wrapper.empty();
  if (!type_ok || !name || !name->is_string()) {
    return JsonFieldError{"tool_choice", "must be \"auto\", \"none\", \"required\" or " + named};
  }
  r.forced_tool = name->get<std::string>();
  r.tool_choice = backend::ToolChoice::kRequired;
  return std::nullopt;
}

}  // namespace gantry::protocol
