#include "gantry/protocol/anthropic_codec.h"

#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "gantry/core/json.h"
#include "gantry/core/json_reader.h"
#include "gantry/core/random_id.h"
#include "gantry/protocol/tool_reader.h"

namespace gantry::protocol::anthropic {

namespace {

using backend::FinishReason;
using nlohmann::json;

std::string type_of(const json& v) { return v.type_name(); }

std::string at(std::string_view base, size_t i) { return std::string(base) + "[" + std::to_string(i) + "]"; }

std::string clip(std::string_view s) { return std::string(s.substr(0, 80)); }

using Err = std::optional<ApiError>;

// The readers of core/json_reader.h, with Anthropic's error shape ("field: problem"). `path` is what goes
// before the key in the field's name ("messages[0].content[1].", "" at the root).
Err as_api_error(JsonFieldCheck c) {
  if (!c) return std::nullopt;
  return bad_request(c->field, c->prefixed());
}

Err read_string(const json& obj, const char* key, const std::string& path, std::string& out) {
  return as_api_error(read_json_string(obj, key, path, out));
}

Err read_bool(const json& obj, const char* key, const std::string& path, bool& out) {
  return as_api_error(read_json_bool(obj, key, path, out));
}

Err read_int(const json& obj, const char* key, int64_t lo, int64_t hi, std::optional<int64_t>& out) {
  return as_api_error(read_json_int(obj, key, "", lo, hi, out));
}

Err read_number(const json& obj, const char* key, double lo, double hi, std::optional<double>& out) {
  return as_api_error(read_json_number(obj, key, "", lo, hi, out));
}

// A block's "type", required.
Err block_type(const json& block, const std::string& path, std::string& type) {
  if (!block.is_object()) return bad_request(path, "must be a content block object, got " + type_of(block));
  const json* t = json_field(block, "type");
  if (!t || !t->is_string()) return bad_request(path + ".type", "is required: a string (\"text\", ...)");
  type = t->get<std::string>();
  return std::nullopt;
}

ApiError unsupported_block(const std::string& path, const std::string& type, std::string_view allowed) {
  if (type == "image" || type == "document") {
    return bad_request(path + ".type", "\"" + type +
                                           "\" blocks are not supported: the models served here read text "
                                           "only (send the content as text blocks)");
  }
  return bad_request(path + ".type", "block type \"" + clip(type) + "\" is not supported here (" +
                                         std::string(allowed) + ")");
}

// A text block's text, required.
Err text_of(const json& block, const std::string& path, std::string& out) {
  const json* t = json_field(block, "text");
  if (!t || !t->is_string()) return bad_request(path + ".text", "is required: a string");
  out = t->get<std::string>();
  return std::nullopt;
}

void append_text(std::string& to, const std::string& text) {
  if (!to.empty() && !text.empty()) to += '\n';
  to += text;
}

// "system": a string or an array of text blocks.
Err read_system(const json& j, MessagesRequest& r) {
  const json* s = json_field(j, "system");
  if (!s) return std::nullopt;
  std::string text;
  if (s->is_string()) {
    text = s->get<std::string>();
  } else if (s->is_array()) {
    for (size_t i = 0; i < s->size(); ++i) {
      const std::string p = at("system", i);
      std::string type, t;
      if (auto e = block_type((*s)[i], p, type)) return e;
      if (type != "text") return unsupported_block(p, type, "system takes text blocks only");
      if (auto e = text_of((*s)[i], p, t)) return e;
      append_text(text, t);
    }
  } else {
    return bad_request("system", "must be a string or an array of text blocks, got " + type_of(*s));
  }
  r.chat.messages.emplace_back("system", std::move(text));
  r.origins.push_back({"system", {}});
  return std::nullopt;
}

// A tool_result's "content": a string or an array of text blocks.
Err tool_result_text(const json& block, const std::string& path, std::string& out) {
  const json* c = json_field(block, "content");
  if (!c) return std::nullopt;
  if (c->is_string()) {
    out = c->get<std::string>();
    return std::nullopt;
  }
  if (!c->is_array()) {
    return bad_request(path + ".content", "must be a string or an array of text blocks, got " + type_of(*c));
  }
  for (size_t k = 0; k < c->size(); ++k) {
    const std::string p = at(path + ".content", k);
    std::string type, t;
    if (auto e = block_type((*c)[k], p, type)) return e;
    if (type != "text") return unsupported_block(p, type, "a tool_result holds text blocks only");
    if (auto e = text_of((*c)[k], p, t)) return e;
    append_text(out, t);
  }
  return std::nullopt;
}

// One message of "messages" (path "messages[i]"): appends the chat messages it becomes.
Err read_message(const json& msg, const std::string& path, MessagesRequest& r) {
  if (!msg.is_object()) return bad_request(path, "must be an object {role, content}, got " + type_of(msg));
  const json* role_v = json_field(msg, "role");
  if (!role_v || !role_v->is_string() ||
      (role_v->get<std::string>() != "user" && role_v->get<std::string>() != "assistant")) {
    return bad_request(path + ".role",
                       "must be \"user\" or \"assistant\" (the system prompt goes in 'system')");
  }
  const std::string role = role_v->get<std::string>();
  const bool assistant = role == "assistant";
  const json* content = json_field(msg, "content");
  if (!content) return bad_request(path + ".content", "is required: a string or an array of content blocks");
  if (content->is_string()) {
    r.chat.messages.emplace_back(role, content->get<std::string>());
    r.origins.push_back({path, {}});
    return std::nullopt;
  }
  if (!content->is_array()) {
    return bad_request(path + ".content",
                       "must be a string or an array of content blocks, got " + type_of(*content));
  }
  const std::string_view allowed = assistant ? "an assistant message takes text, tool_use and thinking blocks"
                                             : "a user message takes text and tool_result blocks";
  backend::ChatMessage m(role, "");
  MessageOrigin origin{path, {}};
  bool pending = false;  // a user message: text blocks not yet sent as a message
  size_t added = 0;      // chat messages this message became so far
  auto flush_user = [&] {
    r.chat.messages.push_back(std::move(m));
    r.origins.push_back(origin);
    m = backend::ChatMessage(role, "");
    pending = false;
    ++added;
  };
  for (size_t j = 0; j < content->size(); ++j) {
    const json& block = (*content)[j];
    const std::string p = at(path + ".content", j);
    std::string type;
    if (auto e = block_type(block, p, type)) return e;
    if (type == "text") {
      std::string t;
      if (auto e = text_of(block, p, t)) return e;
      append_text(m.content, t);
      pending = true;
    } else if (type == "thinking" || type == "redacted_thinking") {
      if (type == "thinking" && assistant) {
        std::string t;
        if (auto e = read_string(block, "thinking", p + ".", t)) return e;
        append_text(m.reasoning_content, t);
      }
    } else if (type == "tool_use" && assistant) {
      backend::ToolCall call;
      const json* id = json_field(block, "id");
      if (!id || !id->is_string() || id->get<std::string>().empty())
        return bad_request(p + ".id", "is required: the call's id (a non-empty string)");
      call.id = id->get<std::string>();
      const json* name = json_field(block, "name");
      if (!name || !name->is_string()) return bad_request(p + ".name", "is required: the tool's name");
      call.name = name->get<std::string>();
      const json* input = json_field(block, "input");
      if (input && !input->is_object())
        return bad_request(p + ".input", "must be an object (the tool's arguments), got " + type_of(*input));
      call.arguments = input ? dump_json(*input) : "{}";
      m.tool_calls.push_back(std::move(call));
      origin.calls.push_back(p);
    } else if (type == "tool_result" && !assistant) {
      if (pending) flush_user();
      backend::ChatMessage result("tool", "");
      const json* id = json_field(block, "tool_use_id");
      if (!id || !id->is_string() || id->get<std::string>().empty())
        return bad_request(p + ".tool_use_id", "is required: the id of the tool_use block it answers");
      result.tool_call_id = id->get<std::string>();
      if (auto e = tool_result_text(block, p, result.content)) return e;
      bool is_error = false;
      if (auto e = read_bool(block, "is_error", p + ".", is_error)) return e;
      if (is_error) result.content = "Error: " + result.content;
      r.chat.messages.push_back(std::move(result));
      r.origins.push_back({p, {}});
      ++added;
    } else {
      return unsupported_block(p, type, allowed);
    }
  }
  // An assistant message is one chat message; a user message keeps its trailing text (or, holding
  // no block at all, is one empty message).
  if (assistant || pending || added == 0) {
    r.chat.messages.push_back(std::move(m));
    r.origins.push_back(std::move(origin));
  }
  return std::nullopt;
}

Err read_messages(const json& j, MessagesRequest& r) {
  const json* m = json_field(j, "messages");
  if (!m) return bad_request("messages", "is required: an array of {role, content} messages");
  if (!m->is_array() || m->empty()) {
    return bad_request("messages", "must be a non-empty array of messages, got " +
                                       (m->is_array() ? std::string("an empty array") : type_of(*m)));
  }
  for (size_t i = 0; i < m->size(); ++i) {
    if (auto e = read_message((*m)[i], at("messages", i), r)) return e;
  }
  return std::nullopt;
}

// "tools": [{name, description, input_schema}] (client tools; type "custom" or absent).
Err read_tools(const json& j, std::vector<backend::ToolDefinition>& out) {
  return as_api_error(protocol::read_tools(j, kAnthropicTools, out));
}

// "tool_choice": {"type": "auto" | "any" | "none" | "tool", "name", "disable_parallel_tool_use"}.
Err read_tool_choice(const json& j, backend::ChatRequest& r) {
  const json* tc = json_field(j, "tool_choice");
  if (!tc) return std::nullopt;
  const char* kShape =
      "must be {\"type\": \"auto\" | \"any\" | \"none\"} or {\"type\": \"tool\", \"name\": ...}";
  if (!tc->is_object()) return bad_request("tool_choice", std::string(kShape) + ", got " + type_of(*tc));
  const json* type = json_field(*tc, "type");
  const std::string t = type && type->is_string() ? type->get<std::string>() : "";
  if (t == "auto") {
    r.tool_choice = backend::ToolChoice::kAuto;
  } else if (t == "any") {
    r.tool_choice = backend::ToolChoice::kRequired;
  } else if (t == "none") {
    r.tool_choice = backend::ToolChoice::kNone;
  } else if (t == "tool") {
    const json* name = json_field(*tc, "name");
    if (!name || !name->is_string() || name->get<std::string>().empty())
      return bad_request("tool_choice.name", "is required with type \"tool\": the name of one of the tools");
    r.forced_tool = name->get<std::string>();
    r.tool_choice = backend::ToolChoice::kRequired;
  } else {
    return bad_request("tool_choice.type", kShape);
  }
  bool disable_parallel = false;
  if (auto e = read_bool(*tc, "disable_parallel_tool_use", "tool_choice.", disable_parallel)) return e;
  r.parallel_tool_calls = !disable_parallel;
  return std::nullopt;
}

// "thinking": {"type": "enabled" | "disabled" | "adaptive", "budget_tokens"}.
Err read_thinking(const json& j, backend::ChatRequest& r) {
  const json* th = json_field(j, "thinking");
  if (!th) return std::nullopt;
  if (!th->is_object())
    return bad_request("thinking", "must be an object {\"type\": \"enabled\" | \"disabled\"}");
  const json* type = json_field(*th, "type");
  const std::string t = type && type->is_string() ? type->get<std::string>() : "";
  if (t != "enabled" && t != "disabled" && t != "adaptive")
    return bad_request("thinking.type", "must be \"enabled\", \"disabled\" or \"adaptive\"");
  std::optional<int64_t> budget;
  if (auto e = read_int(*th, "budget_tokens", 1, 1 << 24, budget)) {
    e->field = "thinking.budget_tokens";
    e->message = "thinking." + e->message;
    return e;
  }
  r.enable_thinking = t != "disabled";
  return std::nullopt;
}

Err read_stop_sequences(const json& j, MessagesRequest& r) {
  const json* s = json_field(j, "stop_sequences");
  if (!s) return std::nullopt;
  if (!s->is_array()) return bad_request("stop_sequences", "must be an array of strings, got " + type_of(*s));
  for (size_t i = 0; i < s->size(); ++i) {
    const json& x = (*s)[i];
    if (!x.is_string() || x.get<std::string>().empty())
      return bad_request(at("stop_sequences", i), "must be a non-empty string");
    r.stop_sequences.push_back(x.get<std::string>());
  }
  r.generation.stop = r.stop_sequences;
  return std::nullopt;
}

#define GANTRY_TRY_FIELD(expr) \
  if (auto gantry_err_ = (expr)) return *gantry_err_

// Anthropic's split: input_tokens are the prompt tokens evaluated for this request, cache reads
// the ones taken from the prompt cache (the prompt is their sum).
// The fields the SDK's Usage types `T | null` are sent, as null where Gantry has nothing to say (no
// server tools, no service tiers, no cache writes billed apart).
json usage_json(int input_tokens, int output_tokens, int cached_tokens = 0) {
  return {{"input_tokens", input_tokens - cached_tokens},
          {"output_tokens", output_tokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", cached_tokens},
          {"cache_creation", {{"ephemeral_1h_input_tokens", 0}, {"ephemeral_5m_input_tokens", 0}}},
          {"inference_geo", nullptr},
          {"output_tokens_details", nullptr},
          {"server_tool_use", nullptr},
          {"service_tier", "standard"}};
}

// A tool_use block (the caller: the model itself, not a server tool).
json tool_use_block(std::string id, const std::string& name, json input) {
  return {{"type", "tool_use"},
          {"id", std::move(id)},
          {"name", name},
          {"input", std::move(input)},
          {"caller", {{"type", "direct"}}}};
}

// The translated name of a chat-layer field: "tools[N].function.X" -> "tools[N].X" (parameters ->
// input_schema); "messages[N]..." -> the request path the message came from.
std::string map_field(const MessagesRequest& r, std::string_view f) {
  if (f.rfind("tools[", 0) == 0) {
    std::string out(f);
    if (auto pos = out.find(".function"); pos != std::string::npos) out.erase(pos, 9);
    if (auto pos = out.find(".parameters"); pos != std::string::npos) out.replace(pos, 11, ".input_schema");
    return out;
  }
  if (f.rfind("messages[", 0) != 0) return std::string(f);
  const size_t close = f.find(']');
  if (close == std::string_view::npos) return std::string(f);
  size_t n = 0;
  for (char c : f.substr(9, close - 9)) {
    if (c < '0' || c > '9') return std::string(f);
    n = n * 10 + static_cast<size_t>(c - '0');
  }
  if (n >= r.origins.size()) return std::string(f);
  const MessageOrigin& o = r.origins[n];
  const std::string_view rest = f.substr(close + 1);
  if (rest == ".tool_call_id") return o.path + ".tool_use_id";
  if (rest.rfind(".tool_calls[", 0) == 0) {
    size_t k = 0;
    for (char c : rest.substr(12)) {
      if (c < '0' || c > '9') break;
      k = k * 10 + static_cast<size_t>(c - '0');
    }
    if (k < o.calls.size()) return o.calls[k];
  }
  return o.path;
}

}  // namespace

std::string_view error_type(int status) {
  switch (status) {
    case 400:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

std::string error_body(const ApiError& e) {
  return dump_json(json{{"type", "error"},
                        {"error", {{"type", e.type}, {"message", e.message}}},
                        {"request_id", random_hex_id("req_")}});
}

ApiError bad_request(std::string field, std::string_view message) {
  ApiError e;
  const bool named =
      field.empty() || (message.rfind(field, 0) == 0 && message.substr(field.size(), 2) == ": ");
  e.message = named ? std::string(message) : field + ": " + std::string(message);
  e.field = std::move(field);
  return e;
}

ApiError api_error(const Status& status, std::string field) {
  int code = 500;
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kUnsupported:
    case StatusCode::kCorrupt:
    case StatusCode::kFailedPrecondition:
      code = 400;
      break;
    case StatusCode::kNotFound:
      code = 404;
      break;
    case StatusCode::kResourceExhausted:
      code = 429;
      break;
    case StatusCode::kUnavailable:
    case StatusCode::kCancelled:
      code = 503;
      break;
    default:
      break;
  }
  ApiError e = bad_request(std::move(field), status.message());
  e.http_status = code;
  e.type = std::string(error_type(code));
  return e;
}

std::variant<MessagesRequest, ApiError> parse_messages_request(std::string_view body, Endpoint endpoint) {
  auto parsed = parse_json_unique_keys(body, "the request body", client_json_limits(body));
  if (!parsed.ok()) return bad_request("", parsed.status().message());
  const json& j = *parsed;
  if (!j.is_object()) return bad_request("", "the request body must be a JSON object, got " + type_of(j));

  MessagesRequest r;
  r.endpoint = endpoint;
  r.chat.reasoning_format = backend::ReasoningFormat::kAuto;  // thinking comes back as thinking blocks
  const json* model = json_field(j, "model");
  if (!model || !model->is_string() || model->get<std::string>().empty())
    return bad_request("model", "is required: the name of a served model (GET /v1/models lists them)");
  r.model = model->get<std::string>();
  GANTRY_TRY_FIELD(read_system(j, r));
  GANTRY_TRY_FIELD(read_messages(j, r));
  GANTRY_TRY_FIELD(read_tools(j, r.chat.tools));
  GANTRY_TRY_FIELD(read_tool_choice(j, r.chat));
  GANTRY_TRY_FIELD(read_thinking(j, r.chat));
  if (endpoint == Endpoint::kCountTokens) return r;

  auto& g = r.generation;
  std::optional<int64_t> max_tokens;
  GANTRY_TRY_FIELD(read_int(j, "max_tokens", 1, 1 << 24, max_tokens));
  if (!max_tokens)
    return bad_request("max_tokens", "is required: the most tokens to generate (an integer >= 1)");
  g.max_tokens = static_cast<int>(*max_tokens);
  std::optional<double> temperature, top_p;
  std::optional<int64_t> top_k;
  GANTRY_TRY_FIELD(read_number(j, "temperature", 0.0, 1.0, temperature));
  GANTRY_TRY_FIELD(read_number(j, "top_p", 0.0, 1.0, top_p));
  GANTRY_TRY_FIELD(read_int(j, "top_k", 0, 1 << 20, top_k));
  if (temperature) g.sampling.temperature = static_cast<float>(*temperature);
  if (top_p) {
    if (*top_p == 0.0)
      g.sampling.temperature = 0;  // keep only the most likely token: greedy
    else
      g.sampling.top_p = static_cast<float>(*top_p);
  }
  if (top_k) g.sampling.top_k = static_cast<int>(*top_k);
  GANTRY_TRY_FIELD(read_stop_sequences(j, r));
  GANTRY_TRY_FIELD(read_bool(j, "stream", "", r.stream));
  if (const json* md = json_field(j, "metadata"); md && !md->is_object())
    return bad_request("metadata", "must be an object, got " + type_of(*md));
  return r;
}

std::string request_field(const MessagesRequest& request, std::string_view chat_field) {
  return map_field(request, chat_field);
}

std::string new_message_id() { return random_base62_id("msg_"); }

std::string tool_use_id(std::string_view call_id) {
  if (call_id.empty()) return random_base62_id("toolu_");
  if (call_id.rfind("toolu_", 0) == 0) return std::string(call_id);
  if (call_id.rfind("call_", 0) == 0) return "toolu_" + std::string(call_id.substr(5));
  return "toolu_" + std::string(call_id);
}

StopReason stop_reason(FinishReason finish, const backend::ChatOutput& output,
                       const std::vector<std::string>& stop_sequences) {
  StopReason s;
  if (finish == FinishReason::kMaxTokens) {
    s.reason = "max_tokens";
  } else if (!output.tool_calls.empty()) {
    s.reason = "tool_use";
  } else if (finish == FinishReason::kStopString && !stop_sequences.empty()) {
    s.reason = "stop_sequence";
    if (stop_sequences.size() == 1) s.sequence = stop_sequences.front();
  } else {
    s.reason = "end_turn";
  }
  return s;
}

namespace {

json tool_input(const std::string& arguments) {
  auto parsed = parse_json(arguments.empty() ? std::string_view("{}") : std::string_view(arguments), "input");
  if (parsed.ok() && parsed->is_object()) return std::move(*parsed);
  return json::object();
}

json stop_sequence_json(const StopReason& stop) {
  return stop.sequence ? json(*stop.sequence) : json(nullptr);
}

}  // namespace

std::string message_response(std::string_view id, std::string_view model, const backend::ChatOutput& output,
                             const StopReason& stop, int input_tokens, int output_tokens, int cached_tokens) {
  json content = json::array();
  if (!output.reasoning_content.empty())
    content.push_back({{"type", "thinking"}, {"thinking", output.reasoning_content}, {"signature", ""}});
  if (!output.content.empty())
    content.push_back({{"type", "text"}, {"text", output.content}, {"citations", nullptr}});
  for (const auto& c : output.tool_calls)
    content.push_back(tool_use_block(tool_use_id(c.id), c.name, tool_input(c.arguments)));
  if (content.empty()) content.push_back({{"type", "text"}, {"text", ""}, {"citations", nullptr}});
  return dump_json(json{{"id", id},
                        {"type", "message"},
                        {"role", "assistant"},
                        {"model", model},
                        {"content", std::move(content)},
                        {"container", nullptr},
                        {"stop_details", nullptr},
                        {"stop_reason", stop.reason},
                        {"stop_sequence", stop_sequence_json(stop)},
                        {"usage", usage_json(input_tokens, output_tokens, cached_tokens)}});
}

std::string count_tokens_response(int input_tokens) {
  return dump_json(json{{"input_tokens", input_tokens}});
}

namespace {

json model_info_json(std::string_view id, int64_t created_unix) {
  const std::time_t t = static_cast<std::time_t>(created_unix);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return {{"id", id},
          {"type", "model"},
          {"display_name", id},
          {"created_at", when},
          {"capabilities", nullptr},
          {"max_input_tokens", nullptr},
          {"max_tokens", nullptr}};
}

}  // namespace

std::string model_info(std::string_view id, int64_t created_unix) {
  return dump_json(model_info_json(id, created_unix));
}

std::string models_response(std::span<const std::string> ids, int64_t created_unix) {
  json data = json::array();
  for (const auto& id : ids) data.push_back(model_info_json(id, created_unix));
  return dump_json(json{{"data", std::move(data)},
                        {"has_more", false},
                        {"first_id", ids.empty() ? json(nullptr) : json(ids.front())},
                        {"last_id", ids.empty() ? json(nullptr) : json(ids.back())}});
}

std::string sse_event(std::string_view name, std::string_view data) {
  std::string out = "event: ";
  out += name;
  out += "\ndata: ";
  out += data;
  out += "\n\n";
  return out;
}

std::string sse_error(const ApiError& e) { return sse_event("error", error_body(e)); }

// ------------------------------------------------------------------------------------ EventWriter
EventWriter::EventWriter(std::string id, std::string model) : id_(std::move(id)), model_(std::move(model)) {}

std::string EventWriter::start(int input_tokens) {
  json message = {{"id", id_},
                  {"type", "message"},
                  {"role", "assistant"},
                  {"model", model_},
                  {"content", json::array()},
                  {"container", nullptr},
                  {"stop_details", nullptr},
                  {"stop_reason", nullptr},
                  {"stop_sequence", nullptr},
                  {"usage", usage_json(input_tokens, 0)}};
  return sse_event("message_start",
                   dump_json(json{{"type", "message_start"}, {"message", std::move(message)}})) +
         sse_event("ping", R"({"type":"ping"})");
}

std::string EventWriter::open(Block kind, std::string_view block_json) {
  std::string out = close();
  const size_t index = next_index_++;
  open_ = kind;
  out +=
      sse_event("content_block_start", R"({"type":"content_block_start","index":)" + std::to_string(index) +
                                           R"(,"content_block":)" + std::string(block_json) + "}");
  return out;
}

std::string EventWriter::close() {
  if (open_ == Block::kNone) return {};
  open_ = Block::kNone;
  return sse_event("content_block_stop",
                   R"({"type":"content_block_stop","index":)" + std::to_string(next_index_ - 1) + "}");
}

std::string EventWriter::delta(size_t index, std::string_view delta_json) {
  return sse_event("content_block_delta", R"({"type":"content_block_delta","index":)" +
                                              std::to_string(index) + R"(,"delta":)" +
                                              std::string(delta_json) + "}");
}

std::string EventWriter::add(const backend::ChatOutputDelta& d) {
  std::string out;
  if (!d.reasoning_content.empty()) {
    if (open_ != Block::kThinking)
      out += open(Block::kThinking, R"({"type":"thinking","thinking":"","signature":""})");
    out += delta(next_index_ - 1,
                 dump_json(json{{"type", "thinking_delta"}, {"thinking", d.reasoning_content}}));
  }
  if (!d.content.empty()) {
    if (open_ != Block::kText) out += open(Block::kText, R"({"type":"text","text":"","citations":null})");
    out += delta(next_index_ - 1, dump_json(json{{"type", "text_delta"}, {"text", d.content}}));
  }
  if (d.tool_index != static_cast<size_t>(-1)) {
    if (!d.tool_call.name.empty()) {  // a call's first delta: its own block
      out += open(Block::kToolUse,
                  dump_json(tool_use_block(tool_use_id(d.tool_call.id), d.tool_call.name, json::object())));
      if (tool_blocks_.size() <= d.tool_index) tool_blocks_.resize(d.tool_index + 1, static_cast<size_t>(-1));
      tool_blocks_[d.tool_index] = next_index_ - 1;
    }
    if (!d.tool_call.arguments.empty() && d.tool_index < tool_blocks_.size() &&
        tool_blocks_[d.tool_index] != static_cast<size_t>(-1)) {
      out += delta(tool_blocks_[d.tool_index],
                   dump_json(json{{"type", "input_json_delta"}, {"partial_json", d.tool_call.arguments}}));
    }
  }
  return out;
}

std::string EventWriter::finish(const StopReason& stop, int input_tokens, int output_tokens,
                                int cached_tokens) {
  std::string out;
  if (next_index_ == 0) out += open(Block::kText, R"({"type":"text","text":"","citations":null})");
  out += close();
  json message_delta = {{"type", "message_delta"},
                        {"delta",
                         {{"container", nullptr},
                          {"stop_details", nullptr},
                          {"stop_reason", stop.reason},
                          {"stop_sequence", stop_sequence_json(stop)}}},
                        {"usage",
                         {{"input_tokens", input_tokens - cached_tokens},
                          {"output_tokens", output_tokens},
                          {"cache_creation_input_tokens", 0},
                          {"cache_read_input_tokens", cached_tokens},
                          {"output_tokens_details", nullptr},
                          {"server_tool_use", nullptr}}}};
  out += sse_event("message_delta", dump_json(message_delta));
  out += sse_event("message_stop", R"({"type":"message_stop"})");
  return out;
}

}  // namespace gantry::protocol::anthropic
