#include "backend/llama/generic_tools.h"

#include <json-schema-to-grammar.h>

#include <exception>
#include <nlohmann/json.hpp>

#include "gantry/core/json.h"

namespace gantry::llama {

namespace {

using nlohmann::ordered_json;

ordered_json parameters_of(const backend::ToolDefinition& t) {
  if (t.parameters.empty()) return ordered_json{{"type", "object"}, {"properties", ordered_json::object()}};
  try {
    return ordered_json::parse(t.parameters);
  } catch (const std::exception&) {
    return ordered_json{{"type", "object"}};
  }
}

// The tools the model may call (a named tool alone when the request forces one).
std::vector<const backend::ToolDefinition*> offered(const backend::ChatRequest& r) {
  std::vector<const backend::ToolDefinition*> out;
  for (const auto& t : r.tools) {
    if (r.forced_tool.empty() || t.name == r.forced_tool) out.push_back(&t);
  }
  return out;
}

bool must_call(const backend::ChatRequest& r) {
  return r.tool_choice == backend::ToolChoice::kRequired || !r.forced_tool.empty();
}

std::string calls_json(const std::vector<backend::ToolCall>& calls) {
  ordered_json a = ordered_json::array();
  for (const auto& c : calls) {
    ordered_json args = ordered_json::object();
    try {
      if (!c.arguments.empty()) args = ordered_json::parse(c.arguments);
    } catch (const std::exception&) {
      args = c.arguments;
    }
    a.push_back({{"name", c.name}, {"arguments", std::move(args)}});
  }
  return ordered_json{{"tool_calls", std::move(a)}}.dump();
}

}  // namespace

std::vector<backend::ChatMessage> generic_tool_messages(const backend::ChatRequest& r) {
  ordered_json tools = ordered_json::array();
  for (const auto* t : offered(r)) {
    tools.push_back({{"name", t->name}, {"description", t->description}, {"parameters", parameters_of(*t)}});
  }
  std::string sys =
      "You can call these tools (JSON):\n" + tools.dump(2) +
      "\n\nAnswer with one JSON object only. To call tools: "
      "{\"tool_calls\": [{\"name\": \"<tool name>\", \"arguments\": {<the tool's parameters>}}]}";
  if (!must_call(r)) sys += "\nTo answer without a tool: {\"response\": \"<your answer>\"}";
  if (must_call(r)) sys += "\nYou must call a tool.";

  std::vector<backend::ChatMessage> out;
  size_t i = 0;
  if (!r.messages.empty() && (r.messages[0].role == "system" || r.messages[0].role == "developer")) {
    out.emplace_back("system", r.messages[0].content + "\n\n" + sys);
    i = 1;
  } else {
    out.emplace_back("system", sys);
  }
  for (; i < r.messages.size(); ++i) {
    const auto& m = r.messages[i];
    if (m.role == "assistant" && !m.tool_calls.empty()) {
      out.emplace_back("assistant", calls_json(m.tool_calls));
    } else if (m.role == "tool") {
      ordered_json result = {{"tool_result", m.content}};
      if (!m.tool_call_id.empty()) result["tool_call_id"] = m.tool_call_id;
      if (!m.tool_name.empty()) result["name"] = m.tool_name;
      out.emplace_back("tool", result.dump());
    } else {
      out.emplace_back(m.role == "developer" ? "system" : m.role, m.content);
    }
  }
  return out;
}

Result<std::string> generic_tool_grammar(const backend::ChatRequest& r) {
  ordered_json any_call = ordered_json::array();
  for (const auto* t : offered(r)) {
    any_call.push_back({{"type", "object"},
                        {"properties", {{"name", {{"const", t->name}}}, {"arguments", parameters_of(*t)}}},
                        {"required", {"name", "arguments"}}});
  }
  ordered_json calls = {{"type", "array"}, {"items", {{"anyOf", std::move(any_call)}}}, {"minItems", 1}};
  if (!r.parallel_tool_calls) calls["maxItems"] = 1;
  ordered_json call_answer = {
      {"type", "object"}, {"properties", {{"tool_calls", std::move(calls)}}}, {"required", {"tool_calls"}}};
  ordered_json schema = call_answer;
  if (!must_call(r)) {
    ordered_json text_answer = {
        {"type", "object"}, {"properties", {{"response", {{"type", "string"}}}}}, {"required", {"response"}}};
    schema = {{"anyOf", {std::move(call_answer), std::move(text_answer)}}};
  }
  try {
    return json_schema_to_grammar(common_json::parse(schema.dump()));
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("tools: llama.cpp could not build the tool-call grammar: ") +
                           e.what());
  }
}

backend::ChatOutput parse_generic_tool_answer(const std::string& text) {
  backend::ChatOutput out;
  auto parsed = parse_json(text, "the model's answer");
  if (!parsed.ok() || !parsed->is_object()) {
    out.content = text;
    return out;
  }
  const nlohmann::json& j = *parsed;
  if (auto it = j.find("response"); it != j.end() && it->is_string()) {
    out.content = it->get<std::string>();
    return out;
  }
  auto calls = j.find("tool_calls");
  if (calls == j.end() || !calls->is_array()) {
    out.content = text;
    return out;
  }
  for (const auto& c : *calls) {
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string()) continue;
    backend::ToolCall call;
    call.id = backend::new_tool_call_id();
    call.name = c["name"].get<std::string>();
    call.arguments = c.contains("arguments") ? c["arguments"].dump() : "{}";
    out.tool_calls.push_back(std::move(call));
  }
  if (out.tool_calls.empty()) out.content = text;
  return out;
}

namespace {

class GenericToolParser final : public backend::ChatOutputParser {
 public:
  std::vector<backend::ChatOutputDelta> add(std::string_view text, bool final) override {
    text_ += text;
    if (!final) return {};
    output_ = parse_generic_tool_answer(text_);
    return tracker_.update(output_, true);
  }
  const backend::ChatOutput& output() const override { return output_; }

 private:
  std::string text_;
  backend::ChatOutput output_;
  backend::ChatDeltaTracker tracker_;
};

}  // namespace

std::unique_ptr<backend::ChatOutputParser> make_generic_tool_parser() {
  return std::make_unique<GenericToolParser>();
}

}  // namespace gantry::llama
