#include "gantry/protocol/openai_codec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "gantry/core/json.h"
#include "gantry/core/json_reader.h"
#include "gantry/protocol/tool_reader.h"

namespace gantry::protocol::openai {

namespace {

using backend::FinishReason;
using nlohmann::json;

std::string sse(const json& j) { return "data: " + dump_json(j) + "\n\n"; }

ApiError bad(std::string param, std::string message) {
  ApiError e;
  e.param = std::move(param);
  e.message = std::move(message);
  return e;
}

std::string type_of(const json& v) { return v.type_name(); }

// The readers of core/json_reader.h, with OpenAI's error shape: `param` names the field.
using Err = std::optional<ApiError>;

Err as_api_error(JsonFieldCheck c) {
  if (!c) return std::nullopt;
  return bad(c->field, c->quoted());
}

Err read_bool(const json& obj, const char* key, bool& out) {
  return as_api_error(read_json_bool(obj, key, "", out));
}

Err read_int(const json& obj, const char* key, int64_t lo, int64_t hi, std::optional<int64_t>& out) {
  return as_api_error(read_json_int(obj, key, "", lo, hi, out));
}

Err read_number(const json& obj, const char* key, double lo, double hi, std::optional<double>& out) {
  return as_api_error(read_json_number(obj, key, "", lo, hi, out));
}

Err read_string(const json& obj, const char* key, std::string& out) {
  return as_api_error(read_json_string(obj, key, "", out));
}

// A message's content: a string, null, or an array of {"type":"text","text":...} parts.
Err read_content(const json& msg, const std::string& param, std::string& out) {
  const json* c = json_field(msg, "content");
  if (!c) return std::nullopt;
  if (c->is_string()) {
    out = c->get<std::string>();
    return std::nullopt;
  }
  if (!c->is_array()) {
    return bad(param, "'" + param + "' must be a string or an array of content parts, got " + type_of(*c));
  }
  for (size_t j = 0; j < c->size(); ++j) {
    const json& part = (*c)[j];
    const std::string pp = param + "[" + std::to_string(j) + "]";
    if (!part.is_object()) return bad(pp, "'" + pp + "' must be an object, got " + type_of(part));
    const json* type = json_field(part, "type");
    if (!type || !type->is_string()) return bad(pp + ".type", "'" + pp + ".type' must be a string");
    if (type->get<std::string>() != "text") {
      return bad(pp + ".type",
                 "content part type '" + type->get<std::string>().substr(0, 80) +
                     "' is not supported (only \"text\": the models served here read no images, "
                     "audio or files)");
    }
    const json* text = json_field(part, "text");
    if (!text || !text->is_string()) return bad(pp + ".text", "'" + pp + ".text' must be a string");
    out += text->get<std::string>();
  }
  return std::nullopt;
}

// An assistant message's "tool_calls": [{"id", "type": "function", "function": {"name", "arguments"}}]
// ("arguments" a JSON string as OpenAI sends it; an object is taken too).
Err read_tool_calls(const json& msg, const std::string& p, std::vector<backend::ToolCall>& out) {
  const json* calls = json_field(msg, "tool_calls");
  if (!calls) return std::nullopt;
  const std::string param = p + ".tool_calls";
  if (!calls->is_array()) return bad(param, "'" + param + "' must be an array, got " + type_of(*calls));
  for (size_t k = 0; k < calls->size(); ++k) {
    const json& c = (*calls)[k];
    const std::string cp = param + "[" + std::to_string(k) + "]";
    if (!c.is_object()) return bad(cp, "'" + cp + "' must be an object, got " + type_of(c));
    backend::ToolCall call;
    if (auto e = read_string(c, "id", call.id)) return bad(cp + ".id", "'" + cp + ".id' must be a string");
    const json* fn = json_field(c, "function");
    if (!fn || !fn->is_object()) {
      return bad(cp + ".function", "'" + cp + ".function' must be an object {\"name\", \"arguments\"}");
    }
    const json* name = json_field(*fn, "name");
    if (!name || !name->is_string()) {
      return bad(cp + ".function.name", "'" + cp + ".function.name' must be a string");
    }
    call.name = name->get<std::string>();
    if (const json* args = json_field(*fn, "arguments")) {
      if (args->is_string()) {
        call.arguments = args->get<std::string>();
      } else if (args->is_object()) {
        call.arguments = dump_json(*args);
      } else {
        return bad(cp + ".function.arguments",
                   "'" + cp + ".function.arguments' must be a JSON object encoded as a string, got " +
                       type_of(*args));
      }
    }
    if (!call.arguments.empty()) {
      auto parsed =
          parse_json(call.arguments, cp + ".function.arguments", client_json_limits(call.arguments));
      if (!parsed.ok() || !parsed->is_object()) {
        return bad(
            cp + ".function.arguments",
            "'" + cp + ".function.arguments' must hold a JSON object, got: " + call.arguments.substr(0, 80));
      }
    }
    out.push_back(std::move(call));
  }
  return std::nullopt;
}

Err read_messages(const json& obj, std::vector<backend::ChatMessage>& out) {
  const json* m = json_field(obj, "messages");
  if (!m) return bad("messages", "'messages' is required: an array of {role, content} objects");
  if (!m->is_array() || m->empty()) {
    return bad("messages", "'messages' must be a non-empty array, got " +
                               (m->is_array() ? std::string("an empty array") : type_of(*m)));
  }
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    const std::string p = "messages[" + std::to_string(i) + "]";
    if (!msg.is_object()) return bad(p, "'" + p + "' must be an object, got " + type_of(msg));
    backend::ChatMessage cm;
    const json* role = json_field(msg, "role");
    if (!role || !role->is_string() || role->get<std::string>().empty()) {
      return bad(p + ".role", "'" + p + ".role' must be a non-empty string (system, user, assistant, ...)");
    }
    cm.role = role->get<std::string>();
    if (cm.role == "function") {
      return bad(p + ".role", "'" + p + ".role' \"function\" is the deprecated form of tools: use \"tool\"");
    }
    if (auto e = read_content(msg, p + ".content", cm.content)) return e;
    if (cm.role == "assistant") {
      if (auto e = read_tool_calls(msg, p, cm.tool_calls)) return e;
      if (auto e = read_string(msg, "reasoning_content", cm.reasoning_content)) {
        e->param = p + ".reasoning_content";
        return e;
      }
    }
    if (cm.role == "tool") {
      if (auto e = read_string(msg, "tool_call_id", cm.tool_call_id)) {
        e->param = p + ".tool_call_id";
        return e;
      }
      if (cm.tool_call_id.empty()) {
        return bad(p + ".tool_call_id",
                   "'" + p + ".tool_call_id' is required in a tool message: the id of the call it answers");
      }
      if (auto e = read_string(msg, "name", cm.tool_name)) {
        e->param = p + ".name";
        return e;
      }
    }
    out.push_back(std::move(cm));
  }
  return std::nullopt;
}

Err read_tools(const json& obj, std::vector<backend::ToolDefinition>& out) {
  return as_api_error(protocol::read_tools(obj, kOpenAiChatTools, out));
}

Err read_tool_choice(const json& obj, backend::ChatRequest& r) {
  return as_api_error(protocol::read_tool_choice(obj, kOpenAiChatTools, r));
}

// A token id of a prompt given as token ids.
bool is_token(const json& t) {
  return t.is_number_integer() && t.get<int64_t>() >= 0 && t.get<int64_t>() <= INT32_MAX;
}

Err read_prompt(const json& obj, std::string& out, std::vector<int32_t>& tokens) {
  const json* p = json_field(obj, "prompt");
  if (!p) return bad("prompt", "'prompt' is required: a string, an array of strings or token ids");
  if (p->is_string()) {
    out = p->get<std::string>();
    return std::nullopt;
  }
  if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
    out = (*p)[0].get<std::string>();
    return std::nullopt;
  }
  // Token ids: [1, 2, 3], or one such array in an array.
  const json* ids = p->is_array() && p->size() == 1 && (*p)[0].is_array() ? &(*p)[0] : p;
  if (ids->is_array() && !ids->empty() && std::all_of(ids->begin(), ids->end(), is_token)) {
    for (const auto& t : *ids) tokens.push_back(static_cast<int32_t>(t.get<int64_t>()));
    return std::nullopt;
  }
  return bad("prompt",
             "'prompt' must be a string, an array of one string, or token ids (an array of non-negative "
             "integers, or one such array in an array); several prompts in one request are not supported: "
             "send one request per prompt");
}

Err read_stop(const json& obj, std::vector<std::string>& out) {
  return as_api_error(read_json_strings(obj, "stop", "", out, 4));
}

Err read_response_format(const json& obj, backend::OutputConstraint& out) {
  const json* rf = json_field(obj, "response_format");
  if (!rf) return std::nullopt;
  if (!rf->is_object())
    return bad("response_format", "'response_format' must be an object, got " + type_of(*rf));
  const json* type = json_field(*rf, "type");
  if (!type || !type->is_string()) {
    return bad("response_format.type",
               "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"");
  }
  const std::string t = type->get<std::string>();
  using Kind = backend::OutputConstraint::Kind;
  if (t == "text") {
    out.kind = Kind::kNone;
  } else if (t == "json_object") {
    out.kind = Kind::kJsonObject;
  } else if (t == "json_schema") {
    const json* js = json_field(*rf, "json_schema");
    if (!js || !js->is_object()) {
      return bad("response_format.json_schema",
                 "'response_format.json_schema' must be an object {\"name\", \"schema\"} when type is "
                 "\"json_schema\"");
    }
    const json* schema = json_field(*js, "schema");
    if (!schema) {
      out.kind = Kind::kJsonObject;  // no schema: any JSON object
    } else if (!schema->is_object() && !schema->is_boolean()) {
      return bad(
          "response_format.json_schema.schema",
          "'response_format.json_schema.schema' must be a JSON schema object, got " + type_of(*schema));
    } else {
      out.kind = Kind::kJsonSchema;
      out.json_schema = dump_json(*schema);
    }
  } else {
    return bad(
        "response_format.type",
        "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", got \"" + t + "\"");
  }
  return std::nullopt;
}

#define GANTRY_TRY_FIELD(expr) \
  if (auto gantry_err_ = (expr)) return *gantry_err_

// presence_penalty and frequency_penalty (-2..2); repetition_penalty or repeat_penalty (> 0).
Err read_penalties(const json& obj, backend::SamplingParams& sp) {
  std::optional<double> presence, frequency;
  GANTRY_TRY_FIELD(read_number(obj, "presence_penalty", -2.0, 2.0, presence));
  GANTRY_TRY_FIELD(read_number(obj, "frequency_penalty", -2.0, 2.0, frequency));
  if (presence) sp.presence_penalty = static_cast<float>(*presence);
  if (frequency) sp.frequency_penalty = static_cast<float>(*frequency);
  for (const char* key : {"repetition_penalty", "repeat_penalty"}) {
    std::optional<double> repeat;
    GANTRY_TRY_FIELD(read_number(obj, key, 0.0, 1e6, repeat));
    if (!repeat) continue;
    if (*repeat <= 0.0) {
      return bad(key, std::string("'") + key + "' must be > 0 (1 = off), got " + json(*repeat).dump());
    }
    sp.repeat_penalty = static_cast<float>(*repeat);
  }
  return std::nullopt;
}

// "logit_bias": {"<token id>": bias in -100..100, ...}.
Err read_logit_bias(const json& obj, std::vector<std::pair<int32_t, float>>& out) {
  const json* lb = json_field(obj, "logit_bias");
  if (!lb) return std::nullopt;
  if (!lb->is_object()) {
    return bad("logit_bias", "'logit_bias' must be an object {\"token id\": bias}, got " + type_of(*lb));
  }
  for (const auto& [key, value] : lb->items()) {
    int64_t token = -1;
    const bool digits =
        !key.empty() && key.size() <= 10 && key.find_first_not_of("0123456789") == std::string::npos;
    if (digits) token = std::stoll(key);
    if (!digits || token > INT32_MAX) {
      return bad("logit_bias",
                 "'logit_bias' keys must be token ids (non-negative integers as strings), got \"" +
                     key.substr(0, 40) + "\"");
    }
    if (!value.is_number() || !(value.get<double>() >= -100.0 && value.get<double>() <= 100.0)) {
      return bad("logit_bias", "'logit_bias' values must be numbers in -100..100, got " +
                                   value.dump().substr(0, 40) + " for token " + key);
    }
    // OpenAI: -100 bans the token. A logit pushed down by 100 can still win where logits are large,
    // so -100 becomes -inf.
    const float bias =
        value.get<double>() <= -100.0 ? -std::numeric_limits<float>::infinity() : value.get<float>();
    out.emplace_back(static_cast<int32_t>(token), bias);
  }
  return std::nullopt;
}

std::variant<json, ApiError> parse_object(std::string_view body) {
  auto parsed = parse_json_unique_keys(body, "the request body", client_json_limits(body));
  if (!parsed.ok()) return bad("", parsed.status().message());
  json& j = *parsed;
  if (!j.is_object()) return bad("", "the request body must be a JSON object, got " + type_of(j));
  return std::move(j);
}

json usage(int prompt_tokens, int completion_tokens, int cached_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

json bytes_of(std::string_view s) {
  json a = json::array();
  for (char c : s) a.push_back(static_cast<unsigned char>(c));
  return a;
}

json chat_logprobs(std::span<const backend::TokenLogprob> tokens) {
  json content = json::array();
  for (const auto& t : tokens) {
    json top = json::array();
    for (const auto& [text, lp] : t.top)
      top.push_back({{"token", text}, {"logprob", lp}, {"bytes", bytes_of(text)}});
    content.push_back(
        {{"token", t.text}, {"logprob", t.logprob}, {"bytes", bytes_of(t.text)}, {"top_logprobs", top}});
  }
  return {{"content", content}, {"refusal", nullptr}};
}

json completion_logprobs(std::span<const backend::TokenLogprob> logprobs, int top_n, size_t offset = 0) {
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const auto& t : logprobs) {
    tokens.push_back(t.text);
    lps.push_back(t.logprob);
    offsets.push_back(offset);
    offset += t.text.size();
    json top = json::object();
    for (const auto& [text, lp] : t.top) {
      // Two tokens can render alike (invalid UTF-8 both ways): keep the more likely (listed first).
      const std::string key = json(text).dump(-1, ' ', false, json::error_handler_t::replace);
      const std::string plain = json::parse(key).get<std::string>();
      if (!top.contains(plain)) top[plain] = lp;
    }
    tops.push_back(std::move(top));
  }
  return {{"tokens", tokens},
          {"token_logprobs", lps},
          {"top_logprobs", top_n > 0 ? tops : json(nullptr)},
          {"text_offset", offsets}};
}

json chunk_head(std::string_view id, std::string_view model, int64_t created, const char* object) {
  return {{"id", id}, {"object", object}, {"created", created}, {"model", model}};
}

json chat_chunk(std::string_view id, std::string_view model, int64_t created, json delta, json finish,
                const ChunkChoice& c = {}) {
  json j = chunk_head(id, model, created, "chat.completion.chunk");
  j["choices"] = json::array({{{"index", c.index},
                               {"delta", std::move(delta)},
                               {"logprobs", c.logprobs ? chat_logprobs(c.tokens) : json(nullptr)},
                               {"finish_reason", std::move(finish)}}});
  if (c.usage_null) j["usage"] = nullptr;
  return j;
}

json completion_chunk(std::string_view id, std::string_view model, int64_t created, std::string_view text,
                      json finish, const ChunkChoice& c = {}) {
  json j = chunk_head(id, model, created, "text_completion");
  j["choices"] =
      json::array({{{"index", c.index},
                    {"text", text},
                    {"logprobs", c.logprobs ? completion_logprobs(c.tokens, c.top_logprobs, c.text_offset)
                                            : json(nullptr)},
                    {"finish_reason", std::move(finish)}}});
  if (c.usage_null) j["usage"] = nullptr;
  return j;
}

}  // namespace

std::string error_body(const ApiError& e) {
  json err = {{"message", e.message},
              {"type", e.type},
              {"param", e.param.empty() ? json(nullptr) : json(e.param)},
              {"code", e.code.empty() ? json(nullptr) : json(e.code)}};
  return dump_json(json{{"error", std::move(err)}});
}

ApiError chat_refusal_error(const backend::ChatRefusal& refusal, std::string param) {
  ApiError e = api_error(refusal.status, std::move(param));
  if (refusal.field == "model") e.code = "model_not_text_generation";
  return e;
}

ApiError api_error(const Status& status, std::string param) {
  ApiError e;
  e.message = status.message();
  e.param = std::move(param);
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kUnsupported:
      if (backend::is_context_length_exceeded(status)) e.code = "context_length_exceeded";
      break;
    case StatusCode::kResourceExhausted:  // the server's capacity (a full queue or KV cache): retry later
      e.http_status = 429;
      e.type = "rate_limit_error";
      break;
    case StatusCode::kNotFound:
      e.http_status = 404;
      break;
    case StatusCode::kUnavailable:
    case StatusCode::kCancelled:
      e.http_status = 503;
      e.type = "server_error";
      break;
    default:
      e.http_status = 500;
      e.type = "server_error";
  }
  return e;
}

std::variant<TextRequest, ApiError> parse_text_request(std::string_view body, Endpoint endpoint) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  const bool chat = endpoint == Endpoint::kChat;

  TextRequest r;
  r.endpoint = endpoint;
  GANTRY_TRY_FIELD(read_string(j, "model", r.model));
  if (chat) {
    GANTRY_TRY_FIELD(read_messages(j, r.chat.messages));
    GANTRY_TRY_FIELD(read_tools(j, r.chat.tools));
    GANTRY_TRY_FIELD(read_tool_choice(j, r.chat));
    GANTRY_TRY_FIELD(read_bool(j, "parallel_tool_calls", r.chat.parallel_tool_calls));
    GANTRY_TRY_FIELD(read_bool(j, "store", r.store));
    std::string effort;
    GANTRY_TRY_FIELD(read_string(j, "reasoning_effort", effort));
    if (effort == "none") r.chat.enable_thinking = false;
    for (const char* media : {"audio", "modalities"}) {
      const json* v = json_field(j, media);
      if (v && !(v->is_array() && v->size() == 1 && (*v)[0] == "text")) {
        return bad(media,
                   std::string("'") + media + "' is not supported: the models served here produce text only");
      }
    }
  } else {
    GANTRY_TRY_FIELD(read_prompt(j, r.prompt, r.prompt_tokens));
  }

  std::optional<int64_t> n;
  GANTRY_TRY_FIELD(read_int(j, "n", 1, 128, n));
  bool echo = false;
  if (!chat) {
    GANTRY_TRY_FIELD(read_bool(j, "echo", echo));
    if (echo) return bad("echo", "'echo' is not supported");
  }

  GANTRY_TRY_FIELD(read_bool(j, "stream", r.stream));
  if (const json* so = json_field(j, "stream_options")) {
    if (!so->is_object())
      return bad("stream_options", "'stream_options' must be an object, got " + type_of(*so));
    if (auto e = read_bool(*so, "include_usage", r.include_usage)) {
      e->param = "stream_options.include_usage";
      return *e;
    }
  }

  auto& g = r.generation;
  g.max_tokens = 0;  // unset: the server picks
  std::optional<int64_t> max_tokens, max_completion_tokens;
  constexpr int64_t kMaxTokens = 1 << 24;
  GANTRY_TRY_FIELD(read_int(j, "max_tokens", 1, kMaxTokens, max_tokens));
  if (chat) {
    GANTRY_TRY_FIELD(read_int(j, "max_completion_tokens", 1, kMaxTokens, max_completion_tokens));
  }
  if (max_completion_tokens) {
    g.max_tokens = static_cast<int>(*max_completion_tokens);
  } else if (max_tokens) {
    g.max_tokens = static_cast<int>(*max_tokens);
  }

  std::optional<double> temperature, top_p;
  GANTRY_TRY_FIELD(read_number(j, "temperature", 0.0, 2.0, temperature));
  GANTRY_TRY_FIELD(read_number(j, "top_p", 0.0, 1.0, top_p));
  if (temperature) g.sampling.temperature = static_cast<float>(*temperature);
  if (top_p) {
    if (*top_p == 0.0) {
      g.sampling.temperature = 0;  // keep only the most likely token: greedy
    } else {
      g.sampling.top_p = static_cast<float>(*top_p);
    }
  }
  std::optional<int64_t> seed;
  GANTRY_TRY_FIELD(read_int(j, "seed", INT64_MIN, INT64_MAX, seed));
  if (seed) g.sampling.seed = static_cast<uint32_t>(static_cast<uint64_t>(*seed));
  if (n) g.n_choices = static_cast<int>(*n);
  GANTRY_TRY_FIELD(read_penalties(j, g.sampling));
  GANTRY_TRY_FIELD(read_logit_bias(j, g.sampling.logit_bias));

  GANTRY_TRY_FIELD(read_stop(j, g.stop));
  GANTRY_TRY_FIELD(read_response_format(j, g.constraint));
  GANTRY_TRY_FIELD(read_bool(j, "cache_prompt", g.cache_prompt));
  GANTRY_TRY_FIELD(read_bool(j, "ignore_eos", g.ignore_eos));

  if (chat) {
    GANTRY_TRY_FIELD(read_bool(j, "logprobs", r.logprobs));
    std::optional<int64_t> top;
    GANTRY_TRY_FIELD(read_int(j, "top_logprobs", 0, 20, top));
    if (top && *top > 0 && !r.logprobs) {
      return bad("top_logprobs", "'top_logprobs' needs 'logprobs' set to true");
    }
    r.top_logprobs = static_cast<int>(top.value_or(0));
  } else {
    std::optional<int64_t> lp;
    GANTRY_TRY_FIELD(read_int(j, "logprobs", 0, 5, lp));
    r.logprobs = lp.has_value();
    r.top_logprobs = static_cast<int>(lp.value_or(0));
  }
  g.n_logprobs = r.logprobs ? r.top_logprobs : -1;
  return r;
}

std::variant<EmbeddingRequest, ApiError> parse_embedding_request(std::string_view body) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  EmbeddingRequest r;
  GANTRY_TRY_FIELD(read_string(j, "model", r.model));
  const json* in = json_field(j, "input");
  if (!in) return bad("input", "'input' is required: a string or an array of strings");
  if (in->is_string()) {
    r.input.push_back(in->get<std::string>());
  } else if (in->is_array() && !in->empty()) {
    for (const auto& x : *in) {
      if (!x.is_string()) {
        return bad(
            "input",
            "'input' must be a string or a non-empty array of strings (token ids are not supported: "
            "send the text they encode)");
      }
      r.input.push_back(x.get<std::string>());
    }
  } else {
    return bad("input",
               "'input' must be a string or a non-empty array of strings (token ids are not supported: "
            "send the text they encode)");
  }
  std::string format = "float";
  GANTRY_TRY_FIELD(read_string(j, "encoding_format", format));
  if (format != "float" && format != "base64") {
    return bad("encoding_format",
               "'encoding_format' must be \"float\" or \"base64\", got \"" + format + "\"");
  }
  r.base64 = format == "base64";
  if (json_field(j, "dimensions"))
    return bad("dimensions", "'dimensions' is not supported (the model's size is fixed)");
  return r;
}

std::string_view finish_reason(FinishReason r) {
  switch (r) {
    case FinishReason::kMaxTokens:
      return "length";
    case FinishReason::kEndOfGeneration:
    case FinishReason::kStopString:
    case FinishReason::kCancelled:
      return "stop";
  }
  return "stop";
}

std::string_view chat_finish_reason(FinishReason r, const backend::ChatOutput& output) {
  if (!output.tool_calls.empty() && r != FinishReason::kMaxTokens) return "tool_calls";
  return finish_reason(r);
}

namespace {

json tool_calls_json(const std::vector<backend::ToolCall>& calls) {
  json a = json::array();
  for (const auto& c : calls) {
    a.push_back(
        {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
  return a;
}

}  // namespace

std::string chat_response(std::string_view id, std::string_view model, int64_t created,
                          const backend::GenerationResult& result,
                          std::span<const backend::ChatOutput> outputs, const TextRequest& request) {
  json choices = json::array();
  const auto results = backend::choice_results(result);
  for (size_t i = 0; i < results.size() && i < outputs.size(); ++i) {
    const backend::GenerationResult& r = results[i];
    const backend::ChatOutput& output = outputs[i];
    json message = {{"role", "assistant"}, {"refusal", nullptr}};  // refusal: required, nullable
    message["content"] =
        output.content.empty() && !output.tool_calls.empty() ? json(nullptr) : json(output.content);
    if (!output.reasoning_content.empty()) message["reasoning_content"] = output.reasoning_content;
    if (!output.tool_calls.empty()) message["tool_calls"] = tool_calls_json(output.tool_calls);
    choices.push_back({{"index", i},
                       {"message", std::move(message)},
                       {"logprobs", request.logprobs ? chat_logprobs(r.logprobs) : json(nullptr)},
                       {"finish_reason", chat_finish_reason(r.finish, output)}});
  }
  json j = chunk_head(id, model, created, "chat.completion");
  j["choices"] = std::move(choices);
  j["usage"] = usage(result.n_prompt_tokens, backend::completion_tokens(result), result.n_cached_tokens);
  return dump_json(j);
}

std::string chat_response(std::string_view id, std::string_view model, int64_t created,
                          const backend::GenerationResult& result, const backend::ChatOutput& output,
                          const TextRequest& request) {
  return chat_response(id, model, created, result, std::span<const backend::ChatOutput>(&output, 1), request);
}

std::string completion_response(std::string_view id, std::string_view model, int64_t created,
                                const backend::GenerationResult& result, const TextRequest& request) {
  json choices = json::array();
  const auto results = backend::choice_results(result);
  for (size_t i = 0; i < results.size(); ++i) {
    const backend::GenerationResult& r = results[i];
    choices.push_back({{"index", i},
                       {"text", r.text},
                       {"logprobs", request.logprobs ? completion_logprobs(r.logprobs, request.top_logprobs)
                                                     : json(nullptr)},
                       {"finish_reason", finish_reason(r.finish)}});
  }
  json j = chunk_head(id, model, created, "text_completion");
  j["choices"] = std::move(choices);
  j["usage"] = usage(result.n_prompt_tokens, backend::completion_tokens(result), result.n_cached_tokens);
  return dump_json(j);
}

std::string chat_chunk_role(std::string_view id, std::string_view model, int64_t created, int index,
                            bool usage_null) {
  ChunkChoice c;
  c.index = index;
  c.usage_null = usage_null;
  return sse(chat_chunk(id, model, created, {{"role", "assistant"}, {"content", ""}}, nullptr, c));
}

std::string chat_chunk_text(std::string_view id, std::string_view model, int64_t created,
                            std::string_view text) {
  return sse(chat_chunk(id, model, created, {{"content", text}}, nullptr));
}

std::string chat_chunk_delta(std::string_view id, std::string_view model, int64_t created,
                             const backend::ChatOutputDelta& d, const ChunkChoice& choice) {
  json delta = json::object();
  if (!d.reasoning_content.empty()) delta["reasoning_content"] = d.reasoning_content;
  if (!d.content.empty()) delta["content"] = d.content;
  if (d.tool_index != static_cast<size_t>(-1)) {
    json call = {{"index", d.tool_index}};
    json fn = {{"arguments", d.tool_call.arguments}};
    if (!d.tool_call.name.empty()) {
      call["id"] = d.tool_call.id;
      call["type"] = "function";
      fn["name"] = d.tool_call.name;
    }
    call["function"] = std::move(fn);
    delta["tool_calls"] = json::array({std::move(call)});
  }
  return sse(chat_chunk(id, model, created, std::move(delta), nullptr, choice));
}

std::string chat_chunk_finish(std::string_view id, std::string_view model, int64_t created,
                              std::string_view finish_reason, const ChunkChoice& choice) {
  return sse(chat_chunk(id, model, created, json::object(), finish_reason, choice));
}

std::string completion_chunk_text(std::string_view id, std::string_view model, int64_t created,
                                  std::string_view text, const ChunkChoice& choice) {
  return sse(completion_chunk(id, model, created, text, nullptr, choice));
}

std::string completion_chunk_finish(std::string_view id, std::string_view model, int64_t created,
                                    FinishReason reason, const ChunkChoice& choice) {
  return sse(completion_chunk(id, model, created, "", finish_reason(reason), choice));
}

std::string usage_chunk(std::string_view id, std::string_view model, int64_t created, Endpoint endpoint,
                        int prompt_tokens, int completion_tokens, int cached_tokens) {
  json j = chunk_head(id, model, created,
                      endpoint == Endpoint::kChat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = json::array();
  j["usage"] = usage(prompt_tokens, completion_tokens, cached_tokens);
  return sse(j);
}

std::string sse_error(const ApiError& e) { return "data: " + error_body(e) + "\n\n"; }

std::string_view sse_done() { return "data: [DONE]\n\n"; }

std::string base64_encode(std::string_view in) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    const uint32_t v = static_cast<uint32_t>(static_cast<unsigned char>(in[i])) << 16 |
                       static_cast<uint32_t>(static_cast<unsigned char>(in[i + 1])) << 8 |
                       static_cast<unsigned char>(in[i + 2]);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  const size_t rest = in.size() - i;
  if (rest > 0) {
    uint32_t v = static_cast<uint32_t>(static_cast<unsigned char>(in[i])) << 16;
    if (rest == 2) v |= static_cast<uint32_t>(static_cast<unsigned char>(in[i + 1])) << 8;
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string embeddings_response(std::string_view model, const std::vector<std::vector<float>>& vectors,
                                bool base64, int prompt_tokens) {
  json data = json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    json item = {{"object", "embedding"}, {"index", i}};
    const auto& v = vectors[i];
    if (base64) {
      std::string bytes(v.size() * sizeof(float), '\0');
      for (size_t k = 0; k < v.size(); ++k) {
        uint32_t u;
        std::memcpy(&u, &v[k], sizeof u);
        if constexpr (std::endian::native == std::endian::big) u = __builtin_bswap32(u);
        std::memcpy(bytes.data() + k * sizeof u, &u, sizeof u);
      }
      item["embedding"] = base64_encode(bytes);
    } else {
      item["embedding"] = v;
    }
    data.push_back(std::move(item));
  }
  json j = {{"object", "list"},
            {"data", std::move(data)},
            {"model", model},
            {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
  return dump_json(j);
}

std::string models_response(std::span<const ModelEntry> models) {
  json data = json::array();
  for (const auto& m : models) {
    data.push_back({{"id", m.id}, {"object", "model"}, {"created", m.created}, {"owned_by", m.owned_by}});
  }
  return dump_json(json{{"object", "list"}, {"data", std::move(data)}});
}

std::string stored_messages(std::string_view completion_id,
                            const std::vector<backend::ChatMessage>& messages) {
  json out = json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    json item = {{"id", std::string(completion_id) + "-" + std::to_string(i)},
                 {"role", m.role},
                 {"content", m.content.empty() && !m.tool_calls.empty() ? json(nullptr) : json(m.content)},
                 {"refusal", nullptr},
                 {"content_parts", nullptr}};
    if (!m.tool_calls.empty()) item["tool_calls"] = tool_calls_json(m.tool_calls);
    if (m.role == "tool") item["tool_call_id"] = m.tool_call_id;
    out.push_back(std::move(item));
  }
  return dump_json(out);
}

std::string stored_list(std::span<const std::string> items, bool has_more) {
  json data = json::array();
  for (const auto& text : items) {
    json item = json::parse(text, nullptr, false);
    if (!item.is_discarded()) data.push_back(std::move(item));
  }
  const std::string first = data.empty() ? "" : data.front().value("id", "");
  const std::string last = data.empty() ? "" : data.back().value("id", "");
  return dump_json(json{{"object", "list"},
                        {"data", std::move(data)},
                        {"first_id", first},
                        {"last_id", last},
                        {"has_more", has_more}});
}

std::string stored_deleted(std::string_view id) {
  return dump_json(json{{"object", "chat.completion.deleted"}, {"id", id}, {"deleted", true}});
}

}  // namespace gantry::protocol::openai
