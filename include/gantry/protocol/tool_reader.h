// The one reader of a request's tool definitions and of the OpenAI family's tool_choice. Every protocol
// gives a callable function the same three facts (name, description, a JSON schema of its arguments) and
// puts them in different places; a ToolLayout says where, the checks are the same for all. Errors are
// JsonFieldErrors (gantry/core/json_reader.h) that each codec words in its protocol's error shape.
//
//   std::vector<backend::ToolDefinition> tools;
//   if (JsonFieldCheck e = protocol::read_tools(body, protocol::kOpenAiChatTools, tools)) ...
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "gantry/backend/chat.h"
#include "gantry/core/json_reader.h"

namespace gantry::protocol {

struct ToolLayout {
  // "function": the facts are members of the tool's "function" object; "": of the tool itself.
  std::string_view wrapper;
  std::string_view schema_key;  // "parameters" or "input_schema"
  bool schema_required = false;
  std::string_view type;       // the one "type" a tool may have ("function", Anthropic's "custom")
  bool type_required = false;  // false: "type" may be absent
  std::string_view shape;      // one tool as the protocol writes it, for messages
};

// OpenAI chat completions: {"type": "function", "function": {"name", "description", "parameters"}}.
inline constexpr ToolLayout kOpenAiChatTools{"function",
                                             "parameters",
                                             false,
                                             "function",
                                             true,
                                             "{\"type\": \"function\", \"function\": {\"name\", "
                                             "\"description\", \"parameters\"}}"};
// Ollama: the same, "type" may be left out.
inline constexpr ToolLayout kOllamaTools{"function",
                                         "parameters",
                                         false,
                                         "function",
                                         false,
                                         "{\"type\": \"function\", \"function\": {\"name\", \"description\", "
                                         "\"parameters\"}}"};
// OpenAI Responses: {"type": "function", "name", "description", "parameters", "strict"}.
inline constexpr ToolLayout kResponsesTools{"",
                                            "parameters",
                                            false,
                                            "function",
                                            true,
                                            "{\"type\": \"function\", \"name\", \"description\", "
                                            "\"parameters\"}"};
// Anthropic Messages, client tools: {"name", "description", "input_schema"}, type "custom" or absent.
inline constexpr ToolLayout kAnthropicTools{
    "", "input_schema", true, "custom", false, "{\"name\", \"description\", \"input_schema\"}"};

// Reads obj["tools"] (absent or null: none) and appends one ToolDefinition per tool. The name must be a
// non-empty string, the description (optional) a string, the schema a JSON object; the parameters keep
// the schema's text, which backend::prepare_chat checks and turns into a grammar.
JsonFieldCheck read_tools(const nlohmann::json& obj, const ToolLayout& layout,
                          std::vector<backend::ToolDefinition>& out);

// The OpenAI family's "tool_choice" (absent or null: left as is): "auto" | "none" | "required", or one
// named function, {"type": "function", "function": {"name"}} in chat completions (layout.wrapper
// "function") or {"type": "function", "name"} in Responses. A named function sets r.forced_tool and
// ToolChoice::kRequired.
JsonFieldCheck read_tool_choice(const nlohmann::json& obj, const ToolLayout& layout, backend::ChatRequest& r);

}  // namespace gantry::protocol
