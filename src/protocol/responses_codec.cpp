#include "gantry/protocol/responses_codec.h"

#include <map>

#include "gantry/core/json.h"
#include "gantry/core/json_reader.h"
#include "gantry/core/random_id.h"
#include "gantry/protocol/tool_reader.h"

namespace gantry::protocol::responses {

namespace {

using nlohmann::json;
using Err = std::optional<ApiError>;

ApiError bad(std::string param, std::string message) {
  ApiError e;
  e.param = std::move(param);
  e.message = std::move(message);
  return e;
}

std::string in_quotes(const std::string& s) { return "\"" + s.substr(0, 80) + "\""; }

// The readers of core/json_reader.h, with OpenAI's error shape (`param` names the field). `path` is what
// goes before the key in the field's name ("input[2].", "" at the root).
Err as_api_error(JsonFieldCheck c) {
  if (!c) return std::nullopt;
  return bad(c->field, c->quoted());
}

Err read_string(const json& obj, const char* key, const std::string& path, std::string& out) {
  return as_api_error(read_json_string(obj, key, path, out));
}

Err read_bool(const json& obj, const char* key, bool& out) {
  return as_api_error(read_json_bool(obj, key, "", out));
}

Err read_number(const json& obj, const char* key, double lo, double hi, std::optional<double>& out) {
  return as_api_error(read_json_number(obj, key, "", lo, hi, out));
}

// A content part's text: input_text / output_text / text, or a refusal. Media parts are refused.
Err read_part(const json& part, const std::string& p, std::string& out) {
  if (!part.is_object()) return bad(p, "'" + p + "' must be an object, got " + part.type_name());
  std::string type;
  if (auto e = read_string(part, "type", p + ".", type)) return e;
  if (type == "input_text" || type == "output_text" || type == "text") {
    const json* text = json_field(part, "text");
    if (!text || !text->is_string()) return bad(p + ".text", "'" + p + ".text' must be a string");
    out += text->get<std::string>();
    return std::nullopt;
  }
  if (type == "refusal") {
    const json* text = json_field(part, "refusal");
    if (!text || !text->is_string()) return bad(p + ".refusal", "'" + p + ".refusal' must be a string");
    out += text->get<std::string>();
    return std::nullopt;
  }
  if (type == "input_image" || type == "input_file" || type == "input_audio") {
    return bad(p + ".type", "content part type " + in_quotes(type) +
                                " is not supported: the models served here read text only (input_text)");
  }
  return bad(p + ".type",
             "'" + p + ".type' must be \"input_text\" or \"output_text\", got " + in_quotes(type));
}

// A message's or a function_call_output's content: a string or an array of text parts.
Err read_text(const json& v, const std::string& p, std::string& out) {
  if (v.is_string()) {
    out = v.get<std::string>();
    return std::nullopt;
  }
  if (!v.is_array())
    return bad(p, "'" + p + "' must be a string or an array of content parts, got " + v.type_name());
  for (size_t j = 0; j < v.size(); ++j) {
    if (auto e = read_part(v[j], p + "[" + std::to_string(j) + "]", out)) return e;
  }
  return std::nullopt;
}

Err read_arguments(const json& item, const std::string& p, std::string& out) {
  const json* args = json_field(item, "arguments");
  if (!args) return std::nullopt;
  if (args->is_object()) {
    out = dump_json(*args);
    return std::nullopt;
  }
  if (!args->is_string()) {
    return bad(p, "'" + p + "' must be a JSON object encoded as a string, got " + args->type_name());
  }
  out = args->get<std::string>();
  if (out.empty()) {
    out = "{}";  // no arguments: templates that parse them get an empty object
    return std::nullopt;
  }
  auto parsed = parse_json(out, p, client_json_limits(out));
  if (!parsed.ok() || !parsed->is_object()) {
    return bad(p, "'" + p + "' must hold a JSON object, got: " + out.substr(0, 80));
  }
  return std::nullopt;
}

// "input": a string, or an array of message / function_call / function_call_output / reasoning items.
Err read_input(const json& j, std::vector<backend::ChatMessage>& out) {
  const json* in = json_field(j, "input");
  if (!in) return bad("input", "'input' is required: a string or an array of input items");
  if (in->is_string()) {
    out.emplace_back("user", in->get<std::string>());
    return std::nullopt;
  }
  if (!in->is_array() || in->empty()) {
    return bad("input", "'input' must be a string or a non-empty array of input items, got " +
                            (in->is_array() ? std::string("an empty array") : std::string(in->type_name())));
  }
  std::string reasoning;  // from reasoning items, for the next assistant turn
  // Whether the last message is an assistant turn a function_call item may join.
  auto assistant_turn = [&]() -> backend::ChatMessage& {
    if (out.empty() || out.back().role != "assistant") {
      out.emplace_back("assistant", "");
      out.back().reasoning_content = std::exchange(reasoning, {});
    }
    return out.back();
  };
  for (size_t i = 0; i < in->size(); ++i) {
    const json& item = (*in)[i];
    const std::string p = "input[" + std::to_string(i) + "]";
    if (!item.is_object()) return bad(p, "'" + p + "' must be an object, got " + item.type_name());
    std::string type;
    if (auto e = read_string(item, "type", p + ".", type)) return e;
    if (type.empty() && json_field(item, "role")) type = "message";
    if (type == "message") {
      backend::ChatMessage m;
      if (auto e = read_string(item, "role", p + ".", m.role)) return e;
      if (m.role != "user" && m.role != "system" && m.role != "developer" && m.role != "assistant") {
        return bad(p + ".role",
                   "'" + p + ".role' must be \"user\", \"system\", \"developer\" or \"assistant\", got " +
                       in_quotes(m.role));
      }
      const json* content = json_field(item, "content");
      if (!content) return bad(p + ".content", "'" + p + ".content' is required: a string or content parts");
      if (auto e = read_text(*content, p + ".content", m.content)) return e;
      if (m.role == "assistant") m.reasoning_content = std::exchange(reasoning, {});
      out.push_back(std::move(m));
    } else if (type == "function_call") {
      backend::ToolCall call;
      if (auto e = read_string(item, "call_id", p + ".", call.id)) return e;
      if (call.id.empty()) return bad(p + ".call_id", "'" + p + ".call_id' is required: the call's id");
      if (auto e = read_string(item, "name", p + ".", call.name)) return e;
      if (call.name.empty()) return bad(p + ".name", "'" + p + ".name' is required: the function's name");
      if (auto e = read_arguments(item, p + ".arguments", call.arguments)) return e;
      if (call.arguments.empty()) call.arguments = "{}";  // absent: no arguments
      assistant_turn().tool_calls.push_back(std::move(call));
    } else if (type == "function_call_output") {
      backend::ChatMessage m("tool", "");
      if (auto e = read_string(item, "call_id", p + ".", m.tool_call_id)) return e;
      if (m.tool_call_id.empty()) {
        return bad(p + ".call_id", "'" + p + ".call_id' is required: the id of the call this output answers");
      }
      const json* output = json_field(item, "output");
      if (!output) return bad(p + ".output", "'" + p + ".output' is required: the function's result");
      if (auto e = read_text(*output, p + ".output", m.content)) return e;
      out.push_back(std::move(m));
    } else if (type == "reasoning") {
      for (const char* key : {"content", "summary"}) {
        const json* parts = json_field(item, key);
        if (!parts) continue;
        const std::string pp = p + "." + key;
        if (!parts->is_array()) return bad(pp, "'" + pp + "' must be an array, got " + parts->type_name());
        for (size_t k = 0; k < parts->size(); ++k) {
          const json& part = (*parts)[k];
          const json* text = part.is_object() ? json_field(part, "text") : nullptr;
          const std::string kp = pp + "[" + std::to_string(k) + "]";
          if (!text || !text->is_string()) return bad(kp + ".text", "'" + kp + ".text' must be a string");
          if (!reasoning.empty()) reasoning += "\n";
          reasoning += text->get<std::string>();
        }
        break;  // the full text when given, else the summary
      }
    } else {
      return bad(p + ".type",
                 "input item type " + in_quotes(type) +
                     " is not supported (message, function_call, function_call_output, reasoning)");
    }
  }
  return std::nullopt;
}

// "tools": [{"type":"function", "name", "description", "parameters", "strict"}]; also echoed.
Err read_tools(const json& j, std::vector<backend::ToolDefinition>& out, json& echo) {
  echo = json::array();
  const size_t first = out.size();
  if (auto e = as_api_error(protocol::read_tools(j, kResponsesTools, out))) return e;
  const json* tools = json_field(j, "tools");
  for (size_t i = first; i < out.size(); ++i) {
    const json& t = (*tools)[i - first];
    bool strict = true;
    if (auto e =
            as_api_error(read_json_bool(t, "strict", "tools[" + std::to_string(i - first) + "].", strict)))
      return e;
    const json* params = json_field(t, "parameters");
    const backend::ToolDefinition& d = out[i];
    echo.push_back({{"type", "function"},
                    {"name", d.name},
                    {"description", d.description.empty() ? json(nullptr) : json(d.description)},
                    {"parameters", params ? *params : json(nullptr)},
                    {"strict", strict}});
  }
  return std::nullopt;
}

// "tool_choice": "auto" | "none" | "required" | {"type":"function","name"}; echoed as given.
Err read_tool_choice(const json& j, backend::ChatRequest& r, json& echo) {
  echo = "auto";
  if (auto e = as_api_error(protocol::read_tool_choice(j, kResponsesTools, r))) return e;
  if (!r.forced_tool.empty()) {
    echo = {{"type", "function"}, {"name", r.forced_tool}};
  } else if (const json* tc = json_field(j, "tool_choice")) {
    echo = *tc;  // one of the strings
  }
  return std::nullopt;
}

// "text": {"format": {"type":"text"} | {"type":"json_object"} | {"type":"json_schema","name","schema"}}.
Err read_text_format(const json& j, backend::OutputConstraint& out, json& echo) {
  echo = {{"format", {{"type", "text"}}}};
  const json* text = json_field(j, "text");
  if (!text) return std::nullopt;
  if (!text->is_object())
    return bad("text", "'text' must be an object {\"format\": ...}, got " + std::string(text->type_name()));
  const json* format = json_field(*text, "format");
  if (!format) return std::nullopt;
  if (!format->is_object())
    return bad("text.format", "'text.format' must be an object, got " + std::string(format->type_name()));
  std::string type;
  if (auto e = read_string(*format, "type", "text.format.", type)) return e;
  using Kind = backend::OutputConstraint::Kind;
  if (type == "text") {
    out.kind = Kind::kNone;
  } else if (type == "json_object") {
    out.kind = Kind::kJsonObject;
  } else if (type == "json_schema") {
    const json* schema = json_field(*format, "schema");
    if (!schema || !schema->is_object()) {
      return bad("text.format.schema",
                 "'text.format.schema' must be a JSON schema object when the format is \"json_schema\"");
    }
    std::string name;
    if (auto e = read_string(*format, "name", "text.format.", name)) return e;
    out.kind = Kind::kJsonSchema;
    out.json_schema = dump_json(*schema);
  } else {
    return bad(
        "text.format.type",
        "'text.format.type' must be \"text\", \"json_object\" or \"json_schema\", got " + in_quotes(type));
  }
  echo = {{"format", *format}};
  return std::nullopt;
}

#define GANTRY_TRY_FIELD(expr) \
  if (auto gantry_err_ = (expr)) return *gantry_err_

json usage_json(const Usage& u) {
  return {{"input_tokens", u.input_tokens},
          {"input_tokens_details", {{"cached_tokens", u.cached_tokens}, {"cache_write_tokens", 0}}},
          {"output_tokens", u.output_tokens},
          {"output_tokens_details", {{"reasoning_tokens", u.reasoning_tokens}}},
          {"total_tokens", u.input_tokens + u.output_tokens}};
}

// The Response object without output: status "in_progress".
json response_skeleton(const ResponseHead& head) {
  json r = {{"id", head.id},
            {"object", "response"},
            {"created_at", head.created_at},
            {"status", "in_progress"},
            {"background", false},
            {"error", nullptr},
            {"incomplete_details", nullptr},
            {"model", head.model},
            {"output", json::array()}};  // usage: none until it ends (the spec's usage is not nullable)
  for (const auto& [k, v] : head.echo.items()) r[k] = v;
  return r;
}

void set_outcome(json& r, backend::FinishReason finish, const Usage& usage) {
  const bool cut = finish == backend::FinishReason::kMaxTokens;
  r["status"] = cut ? "incomplete" : "completed";
  r["incomplete_details"] = cut ? json{{"reason", "max_output_tokens"}} : json(nullptr);
  r["usage"] = usage_json(usage);
}

json output_text_part(const std::string& text) {
  return {
      {"type", "output_text"}, {"text", text}, {"annotations", json::array()}, {"logprobs", json::array()}};
}

json reasoning_part(const std::string& text) { return {{"type", "reasoning_text"}, {"text", text}}; }

json message_item(const std::string& id, const std::string& text, std::string_view status) {
  json content = json::array();
  if (status != "in_progress") content.push_back(output_text_part(text));
  return {{"id", id}, {"type", "message"}, {"role", "assistant"}, {"status", status}, {"content", content}};
}

json reasoning_item(const std::string& id, const std::string& text, std::string_view status) {
  json content = json::array();
  if (status != "in_progress") content.push_back(reasoning_part(text));
  return {{"id", id},
          {"type", "reasoning"},
          {"summary", json::array()},
          {"content", content},
          {"status", status}};
}

json call_item(const std::string& id, const backend::ToolCall& c, std::string_view status) {
  return {{"id", id},        {"type", "function_call"}, {"status", status}, {"arguments", c.arguments},
          {"call_id", c.id}, {"name", c.name}};
}

}  // namespace

std::variant<ResponsesRequest, ApiError> parse_request(std::string_view body) {
  auto parsed = parse_json_unique_keys(body, "the request body", client_json_limits(body));
  if (!parsed.ok()) return bad("", parsed.status().message());
  const json& j = *parsed;
  if (!j.is_object())
    return bad("", "the request body must be a JSON object, got " + std::string(j.type_name()));

  ResponsesRequest r;
  json& echo = r.echo;
  GANTRY_TRY_FIELD(read_string(j, "model", "", r.model));
  if (r.model.empty()) return bad("model", "'model' is required: the name of a served model");
  if (const json* v = json_field(j, "instructions")) {
    if (!v->is_string())
      return bad("instructions", "'instructions' must be a string, got " + std::string(v->type_name()));
    r.instructions = v->get<std::string>();
  }
  echo["instructions"] = r.instructions.empty() ? json(nullptr) : json(r.instructions);
  GANTRY_TRY_FIELD(read_input(j, r.chat.messages));
  json tools, tool_choice, text;
  GANTRY_TRY_FIELD(read_tools(j, r.chat.tools, tools));
  GANTRY_TRY_FIELD(read_tool_choice(j, r.chat, tool_choice));
  GANTRY_TRY_FIELD(read_bool(j, "parallel_tool_calls", r.chat.parallel_tool_calls));
  echo["tools"] = std::move(tools);
  echo["tool_choice"] = std::move(tool_choice);
  echo["parallel_tool_calls"] = r.chat.parallel_tool_calls;

  GANTRY_TRY_FIELD(read_bool(j, "stream", r.stream));
  GANTRY_TRY_FIELD(read_bool(j, "store", r.store));
  echo["store"] = r.store;
  GANTRY_TRY_FIELD(read_string(j, "previous_response_id", "", r.previous_response_id));
  echo["previous_response_id"] =
      r.previous_response_id.empty() ? json(nullptr) : json(r.previous_response_id);
  bool background = false;
  GANTRY_TRY_FIELD(read_bool(j, "background", background));
  if (background)
    return bad("background", "'background' responses are not supported: answers here are immediate");
  if (json_field(j, "conversation")) {
    return bad("conversation", "'conversation' is not supported: chain responses with previous_response_id");
  }

  auto& g = r.generation;
  g.max_tokens = 0;  // unset: the server picks
  if (const json* v = json_field(j, "max_output_tokens")) {
    constexpr int64_t kMaxTokens = 1 << 24;
    if (!v->is_number_integer() || v->get<int64_t>() < 1 || v->get<int64_t>() > kMaxTokens) {
      return bad("max_output_tokens", "'max_output_tokens' must be an integer in 1.." +
                                          std::to_string(kMaxTokens) + ", got " + v->dump());
    }
    g.max_tokens = static_cast<int>(v->get<int64_t>());
  }
  echo["max_output_tokens"] = g.max_tokens > 0 ? json(g.max_tokens) : json(nullptr);
  std::optional<double> temperature, top_p;
  GANTRY_TRY_FIELD(read_number(j, "temperature", 0.0, 2.0, temperature));
  GANTRY_TRY_FIELD(read_number(j, "top_p", 0.0, 1.0, top_p));
  if (temperature) g.sampling.temperature = static_cast<float>(*temperature);
  if (top_p) {
    if (*top_p == 0.0) {
      g.sampling.temperature = 0;  // only the most likely token: greedy
    } else {
      g.sampling.top_p = static_cast<float>(*top_p);
    }
  }
  echo["temperature"] = temperature.value_or(1.0);
  echo["top_p"] = top_p.value_or(1.0);
  GANTRY_TRY_FIELD(read_text_format(j, g.constraint, text));
  echo["text"] = std::move(text);

  json reasoning = {{"effort", nullptr}, {"summary", nullptr}};
  if (const json* v = json_field(j, "reasoning")) {
    if (!v->is_object())
      return bad("reasoning",
                 "'reasoning' must be an object {\"effort\"}, got " + std::string(v->type_name()));
    std::string effort;
    GANTRY_TRY_FIELD(read_string(*v, "effort", "reasoning.", effort));
    if (effort == "none") r.chat.enable_thinking = false;
    if (!effort.empty()) reasoning["effort"] = effort;
    if (const json* s = json_field(*v, "summary")) reasoning["summary"] = *s;
  }
  echo["reasoning"] = std::move(reasoning);
  echo["truncation"] = "disabled";
  json metadata = json::object();
  if (const json* v = json_field(j, "metadata")) {
    if (!v->is_object())
      return bad("metadata", "'metadata' must be an object of strings, got " + std::string(v->type_name()));
    if (v->size() > 16) return bad("metadata", "'metadata' holds at most 16 keys");
    for (const auto& [k, x] : v->items()) {
      if (!x.is_string()) return bad("metadata", "'metadata." + k.substr(0, 64) + "' must be a string");
    }
    metadata = *v;
  }
  echo["metadata"] = std::move(metadata);
  return r;
}

void resolve_tool_names(std::vector<backend::ChatMessage>& messages) {
  std::map<std::string, std::string, std::less<>> names;
  for (auto& m : messages) {
    for (const auto& c : m.tool_calls) names[c.id] = c.name;
    if (m.role == "tool" && m.tool_name.empty()) {
      auto it = names.find(m.tool_call_id);
      if (it != names.end()) m.tool_name = it->second;
    }
  }
}

std::string map_chat_field(std::string_view f) {
  if (f.rfind("messages", 0) == 0) return "input";
  std::string out(f);
  if (f.rfind("tools[", 0) == 0) {
    if (auto pos = out.find(".function"); pos != std::string::npos) out.erase(pos, 9);
  }
  return out;
}

std::string new_id(std::string_view prefix) { return random_hex_id(std::string(prefix) + "_"); }

json input_items(const std::vector<backend::ChatMessage>& input) {
  json items = json::array();
  for (const auto& m : input) {
    if (m.role == "assistant") {
      if (!m.content.empty() || m.tool_calls.empty())
        items.push_back(message_item(new_id("msg"), m.content, "completed"));
      for (const auto& c : m.tool_calls) items.push_back(call_item(new_id("fc"), c, "completed"));
    } else if (m.role == "tool") {
      items.push_back({{"id", new_id("fco")},
                       {"type", "function_call_output"},
                       {"call_id", m.tool_call_id},
                       {"output", m.content},
                       {"status", "completed"}});
    } else {
      items.push_back({{"id", new_id("msg")},
                       {"type", "message"},
                       {"role", m.role},
                       {"status", "completed"},
                       {"content", json::array({{{"type", "input_text"}, {"text", m.content}}})}});
    }
  }
  return items;
}

std::string input_items_list(const std::string& items_json) {
  json items = json::parse(items_json, nullptr, false);
  if (!items.is_array()) items = json::array();
  const std::string first = items.empty() ? "" : items.front().value("id", "");
  const std::string last = items.empty() ? "" : items.back().value("id", "");
  return dump_json(json{{"object", "list"},
                        {"data", std::move(items)},
                        {"has_more", false},
                        {"first_id", first},
                        {"last_id", last}});
}

std::string input_tokens_body(int input_tokens) {
  return dump_json(json{{"object", "response.input_tokens"}, {"input_tokens", input_tokens}});
}

json response_object(const ResponseHead& head, const backend::ChatOutput& output,
                     backend::FinishReason finish, const Usage& usage) {
  json r = response_skeleton(head);
  const bool cut = finish == backend::FinishReason::kMaxTokens;
  json& items = r["output"];
  if (!output.reasoning_content.empty()) {
    items.push_back(reasoning_item(
        new_id("rs"), output.reasoning_content,
        cut && output.content.empty() && output.tool_calls.empty() ? "incomplete" : "completed"));
  }
  if (!output.content.empty() || output.tool_calls.empty()) {
    items.push_back(message_item(new_id("msg"), output.content,
                                 cut && output.tool_calls.empty() ? "incomplete" : "completed"));
  }
  for (size_t i = 0; i < output.tool_calls.size(); ++i) {
    const bool last = i + 1 == output.tool_calls.size();
    items.push_back(call_item(new_id("fc"), output.tool_calls[i], cut && last ? "incomplete" : "completed"));
  }
  set_outcome(r, finish, usage);
  return r;
}

backend::ChatMessage assistant_message(const backend::ChatOutput& output) {
  backend::ChatMessage m("assistant", output.content);
  m.reasoning_content = output.reasoning_content;
  m.tool_calls = output.tool_calls;
  return m;
}

std::string deleted_body(std::string_view id) {
  return dump_json(json{{"id", id}, {"object", "response"}, {"deleted", true}});
}

// ---- streaming

StreamEncoder::StreamEncoder(ResponseHead head)
    : head_(std::move(head)), response_(response_skeleton(head_)) {}

std::string StreamEncoder::event(json data) {
  data["sequence_number"] = sequence_++;
  const std::string type = data["type"].get<std::string>();
  return "event: " + type + "\ndata: " + dump_json(data) + "\n\n";
}

std::string StreamEncoder::begin() {
  std::string out = event({{"type", "response.created"}, {"response", response_}});
  out += event({{"type", "response.in_progress"}, {"response", response_}});
  return out;
}

std::string StreamEncoder::open(Open kind, const backend::ChatOutputDelta& d) {
  open_ = kind;
  text_.clear();
  const size_t index = response_["output"].size();
  json item;
  std::string out;
  switch (kind) {
    case Open::kReasoning:
      item_id_ = new_id("rs");
      item = reasoning_item(item_id_, "", "in_progress");
      break;
    case Open::kMessage:
      item_id_ = new_id("msg");
      item = message_item(item_id_, "", "in_progress");
      break;
    case Open::kCall:
      item_id_ = new_id("fc");
      call_index_ = d.tool_index;
      call_ = d.tool_call;
      call_.arguments.clear();
      if (call_.id.empty()) call_.id = backend::new_tool_call_id();
      item = call_item(item_id_, call_, "in_progress");
      break;
    case Open::kNone:
      return out;
  }
  response_["output"].push_back(item);
  out += event({{"type", "response.output_item.added"}, {"output_index", index}, {"item", item}});
  if (kind == Open::kMessage || kind == Open::kReasoning) {
    out += event({{"type", "response.content_part.added"},
                  {"item_id", item_id_},
                  {"output_index", index},
                  {"content_index", 0},
                  {"part", kind == Open::kMessage ? output_text_part("") : reasoning_part("")}});
  }
  return out;
}

std::string StreamEncoder::close(std::string_view status) {
  if (open_ == Open::kNone) return {};
  const size_t index = response_["output"].size() - 1;
  json item;
  std::string out;
  const json where = {{"item_id", item_id_}, {"output_index", index}};
  auto with = [&](json j) {
    j.update(where);
    return j;
  };
  switch (open_) {
    case Open::kReasoning:
      out += event(with({{"type", "response.reasoning_text.done"}, {"content_index", 0}, {"text", text_}}));
      out += event(with(
          {{"type", "response.content_part.done"}, {"content_index", 0}, {"part", reasoning_part(text_)}}));
      item = reasoning_item(item_id_, text_, status);
      output_.reasoning_content += text_;
      break;
    case Open::kMessage:
      out += event(with({{"type", "response.output_text.done"},
                         {"content_index", 0},
                         {"text", text_},
                         {"logprobs", json::array()}}));
      out += event(with(
          {{"type", "response.content_part.done"}, {"content_index", 0}, {"part", output_text_part(text_)}}));
      item = message_item(item_id_, text_, status);
      output_.content += text_;
      break;
    case Open::kCall:
      out += event(with({{"type", "response.function_call_arguments.done"},
                         {"name", call_.name},
                         {"arguments", call_.arguments}}));
      item = call_item(item_id_, call_, status);
      output_.tool_calls.push_back(call_);
      break;
    case Open::kNone:
      break;
  }
  response_["output"][index] = item;
  out += event({{"type", "response.output_item.done"}, {"output_index", index}, {"item", item}});
  open_ = Open::kNone;
  return out;
}

std::string StreamEncoder::switch_to(Open kind, const backend::ChatOutputDelta& d) {
  std::string out = close("completed");  // first: open() starts the next item
  out += open(kind, d);
  return out;
}

std::string StreamEncoder::add(const std::vector<backend::ChatOutputDelta>& deltas) {
  std::string out;
  for (const auto& d : deltas) {
    if (!d.reasoning_content.empty()) {
      if (open_ != Open::kReasoning) out += switch_to(Open::kReasoning, d);
      text_ += d.reasoning_content;
      out += event({{"type", "response.reasoning_text.delta"},
                    {"item_id", item_id_},
                    {"output_index", response_["output"].size() - 1},
                    {"content_index", 0},
                    {"delta", d.reasoning_content}});
    }
    if (!d.content.empty()) {
      if (open_ != Open::kMessage) out += switch_to(Open::kMessage, d);
      text_ += d.content;
      out += event({{"type", "response.output_text.delta"},
                    {"item_id", item_id_},
                    {"output_index", response_["output"].size() - 1},
                    {"content_index", 0},
                    {"delta", d.content},
                    {"logprobs", json::array()}});
    }
    if (d.tool_index != static_cast<size_t>(-1)) {
      if (open_ != Open::kCall || call_index_ != d.tool_index) out += switch_to(Open::kCall, d);
      if (!d.tool_call.arguments.empty()) {
        call_.arguments += d.tool_call.arguments;
        out += event({{"type", "response.function_call_arguments.delta"},
                      {"item_id", item_id_},
                      {"output_index", response_["output"].size() - 1},
                      {"delta", d.tool_call.arguments}});
      }
    }
  }
  return out;
}

std::string StreamEncoder::finish(backend::FinishReason finish, const Usage& usage) {
  const bool cut = finish == backend::FinishReason::kMaxTokens;
  std::string out;
  // An answer with no output at all still has its (empty) message, as in a whole response.
  if (open_ == Open::kNone && response_["output"].empty()) out += open(Open::kMessage, {});
  out += close(cut ? "incomplete" : "completed");
  set_outcome(response_, finish, usage);
  out += event({{"type", cut ? "response.incomplete" : "response.completed"}, {"response", response_}});
  return out;
}

std::string StreamEncoder::fail(const ApiError& error) {
  std::string out = close("incomplete");
  const std::string code =
      error.code.empty() ? (error.http_status >= 500 ? "server_error" : error.type) : error.code;
  response_["status"] = "failed";
  response_["error"] = {{"code", code}, {"message", error.message}};
  out += event({{"type", "response.failed"}, {"response", response_}});
  out += event({{"type", "error"},
                {"code", code},
                {"message", error.message},
                {"param", error.param.empty() ? json(nullptr) : json(error.param)}});
  return out;
}

}  // namespace gantry::protocol::responses
