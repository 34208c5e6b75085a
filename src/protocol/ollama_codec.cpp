#include "gantry/protocol/ollama_codec.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "gantry/core/json.h"
#include "gantry/core/json_reader.h"
#include "gantry/protocol/tool_reader.h"

namespace gantry::protocol::ollama {

namespace {

using backend::FinishReason;
using nlohmann::json;
using std::chrono::milliseconds;

ApiError bad(std::string message) { return ApiError{400, std::move(message)}; }

std::string type_of(const json& v) { return v.type_name(); }

using Err = std::optional<ApiError>;

#define GANTRY_TRY_FIELD(expr) \
  if (auto gantry_err_ = (expr)) return *gantry_err_

// The readers of core/json_reader.h, with Ollama's error shape (a message quoting the field). `where`
// is what goes before the key in the field's name ("options.", "" at the root).
Err as_api_error(JsonFieldCheck c) {
  if (!c) return std::nullopt;
  return bad(c->quoted());
}

Err read_bool(const json& obj, const char* key, bool& out) {
  return as_api_error(read_json_bool(obj, key, "", out));
}

Err read_string(const json& obj, const char* key, std::string& out) {
  return as_api_error(read_json_string(obj, key, "", out));
}

// An integer option: an integer, or a number with no fraction (JavaScript clients send 100.0 as 100,
// but other clients may not), within [lo, hi].
Err read_int(const json& obj, const char* key, std::string_view where, int64_t lo, int64_t hi,
             std::optional<int64_t>& out) {
  return as_api_error(read_json_int(obj, key, where, lo, hi, out, JsonIntegers::kIntegralFloat));
}

// A double as a float; out of float's range becomes +-infinity (which validate() refuses) rather
// than an undefined conversion.
float to_float(double x) {
  if (x > std::numeric_limits<float>::max()) return std::numeric_limits<float>::infinity();
  if (x < -std::numeric_limits<float>::max()) return -std::numeric_limits<float>::infinity();
  return static_cast<float>(x);
}

Err read_float(const json& obj, const char* key, std::string_view where, std::optional<double>& out) {
  const double inf = std::numeric_limits<double>::infinity();
  return as_api_error(read_json_number(obj, key, where, -inf, inf, out));
}

// A string or an array of strings; empty strings are dropped.
Err read_stop(const json& obj, std::string_view where, std::vector<std::string>& out) {
  return as_api_error(read_json_strings(obj, "stop", where, out));
}

// `options`: the sampling fields, num_predict, num_ctx and stop (see the header); others are ignored.
Err read_options(const json& obj, TextRequest& r) {
  const json* o = json_field(obj, "options");
  if (!o) return std::nullopt;
  if (!o->is_object()) return bad("'options' must be an object, got " + type_of(*o));
  constexpr std::string_view kWhere = "options.";
  backend::SamplingParams& sp = r.generation.sampling;
  std::optional<double> f;
  GANTRY_TRY_FIELD(read_float(*o, "temperature", kWhere, f));
  if (f) sp.temperature = to_float(*f), f.reset();
  GANTRY_TRY_FIELD(read_float(*o, "top_p", kWhere, f));
  if (f) sp.top_p = to_float(*f), f.reset();
  GANTRY_TRY_FIELD(read_float(*o, "min_p", kWhere, f));
  if (f) sp.min_p = to_float(*f), f.reset();
  GANTRY_TRY_FIELD(read_float(*o, "repeat_penalty", kWhere, f));
  if (f) sp.repeat_penalty = to_float(*f), f.reset();
  GANTRY_TRY_FIELD(read_float(*o, "presence_penalty", kWhere, f));
  if (f) sp.presence_penalty = to_float(*f), f.reset();
  GANTRY_TRY_FIELD(read_float(*o, "frequency_penalty", kWhere, f));
  if (f) sp.frequency_penalty = to_float(*f), f.reset();
  std::optional<int64_t> i;
  GANTRY_TRY_FIELD(read_int(*o, "top_k", kWhere, 0, std::numeric_limits<int32_t>::max(), i));
  if (i) sp.top_k = static_cast<int>(*i), i.reset();
  GANTRY_TRY_FIELD(read_int(*o, "repeat_last_n", kWhere, -1, std::numeric_limits<int32_t>::max(), i));
  if (i) sp.repeat_last_n = static_cast<int>(*i), i.reset();
  GANTRY_TRY_FIELD(read_int(*o, "seed", kWhere, std::numeric_limits<int64_t>::min(),
                            std::numeric_limits<int64_t>::max(), i));
  if (i) {
    // Ollama's default seed is -1 (random); others are taken modulo 2^32.
    sp.seed = *i < 0 ? 0xFFFFFFFFu : static_cast<uint32_t>(static_cast<uint64_t>(*i) & 0xFFFFFFFFu);
    i.reset();
  }
  GANTRY_TRY_FIELD(read_int(*o, "num_predict", kWhere, std::numeric_limits<int32_t>::min(),
                            std::numeric_limits<int32_t>::max(), i));
  if (i && *i != 0) r.num_predict = *i;  // 0: the server's default
  GANTRY_TRY_FIELD(read_int(*o, "num_ctx", kWhere, 0, std::numeric_limits<int32_t>::max(), r.num_ctx));
  GANTRY_TRY_FIELD(read_stop(*o, kWhere, r.generation.stop));
  Status st = backend::validate(sp);
  if (!st.ok()) return bad("options: " + st.message());
  return std::nullopt;
}

// `format`: "json", "" (none) or a JSON schema object.
Err read_format(const json& obj, backend::OutputConstraint& out) {
  const json* f = json_field(obj, "format");
  if (!f) return std::nullopt;
  using Kind = backend::OutputConstraint::Kind;
  if (f->is_string()) {
    const std::string s = f->get<std::string>();
    if (s.empty()) return std::nullopt;
    if (s == "json") {
      out.kind = Kind::kJsonObject;
      return std::nullopt;
    }
    return bad("'format' must be \"json\" or a JSON schema object, got \"" + s + "\"");
  }
  if (!f->is_object()) return bad("'format' must be \"json\" or a JSON schema object, got " + type_of(*f));
  out.kind = Kind::kJsonSchema;
  out.json_schema = dump_json(*f);
  return std::nullopt;
}

Err read_keep_alive(const json& obj, std::optional<milliseconds>& out) {
  const json* k = json_field(obj, "keep_alive");
  if (!k) return std::nullopt;
  if (k->is_number()) {
    const double seconds = k->get<double>();
    if (!std::isfinite(seconds)) return bad("'keep_alive' must be a finite number of seconds");
    // Negative: forever. Beyond a century is forever too (and keeps the arithmetic in range).
    if (seconds < 0 || seconds > 100.0 * 365 * 24 * 3600) {
      out = milliseconds(-1);
    } else {
      out = milliseconds(static_cast<int64_t>(std::llround(seconds * 1000.0)));
    }
    return std::nullopt;
  }
  if (!k->is_string()) {
    return bad("'keep_alive' must be a duration (\"5m\", \"0\", \"-1\") or a number of seconds, got " +
               type_of(*k));
  }
  auto d = parse_duration(k->get<std::string>());
  if (!d.ok()) return bad("'keep_alive': " + d.status().message());
  out = *d;
  return std::nullopt;
}

// Fields this server cannot honour: refused rather than silently dropped.
Err refuse_nonempty(const json& obj, const char* key, const char* why) {
  const json* v = json_field(obj, key);
  if (!v) return std::nullopt;
  const bool empty = v->is_string() ? v->get_ref<const std::string&>().empty()
                                    : (v->is_array() || v->is_object()) && v->empty();
  if (empty) return std::nullopt;
  return bad(std::string("'") + key + "' is not supported: " + why);
}

// A message's tool_calls: [{function: {name, arguments (an object)}}] (an optional "id" is kept).
Err read_tool_calls(const json& msg, const std::string& where, size_t message_index,
                    std::vector<backend::ToolCall>& out) {
  const json* calls = json_field(msg, "tool_calls");
  if (!calls) return std::nullopt;
  if (!calls->is_array()) {
    return bad("'" + where + ".tool_calls' must be an array of {function: {name, arguments}} objects, got " +
               type_of(*calls));
  }
  for (size_t k = 0; k < calls->size(); ++k) {
    const json& c = (*calls)[k];
    const std::string p = where + ".tool_calls[" + std::to_string(k) + "]";
    if (!c.is_object()) return bad("'" + p + "' must be an object, got " + type_of(c));
    const json* fn = json_field(c, "function");
    if (!fn || !fn->is_object()) return bad("'" + p + ".function' must be an object {name, arguments}");
    backend::ToolCall call;
    const json* name = json_field(*fn, "name");
    if (!name || !name->is_string() || name->get_ref<const std::string&>().empty())
      return bad("'" + p + ".function.name' must be a non-empty string");
    call.name = name->get<std::string>();
    const json* args = json_field(*fn, "arguments");
    if (!args) {
      call.arguments = "{}";
    } else if (args->is_object()) {
      call.arguments = dump_json(*args);
    } else if (args->is_string()) {
      // Some clients send the OpenAI form (a JSON text); accepted when it holds an object.
      // parse_json: the string's own nesting is bounded like a body's (kMaxJsonDepth).
      const std::string& text = args->get_ref<const std::string&>();
      auto parsed = parse_json(text, p + ".function.arguments", client_json_limits(text));
      if (!parsed.ok() || !parsed->is_object())
        return bad("'" + p + ".function.arguments' must be an object, got a string that is not one");
      call.arguments = dump_json(*parsed);
    } else {
      return bad("'" + p + ".function.arguments' must be an object, got " + type_of(*args));
    }
    GANTRY_TRY_FIELD(read_string(c, "id", call.id));
    if (call.id.empty()) call.id = "call_" + std::to_string(message_index) + "_" + std::to_string(k);
    out.push_back(std::move(call));
  }
  return std::nullopt;
}

// Gives each tool message the id of the call it answers: the first unanswered call of the latest
// assistant message with calls whose name is its tool_name, else the first unanswered one.
void link_tool_results(std::vector<backend::ChatMessage>& messages) {
  const backend::ChatMessage* caller = nullptr;
  std::vector<bool> answered;
  for (auto& m : messages) {
    if (m.role == "assistant" && !m.tool_calls.empty()) {
      caller = &m;
      answered.assign(m.tool_calls.size(), false);
      continue;
    }
    if (m.role != "tool" || !m.tool_call_id.empty() || !caller) continue;
    size_t pick = answered.size();
    for (size_t k = 0; k < answered.size() && pick == answered.size(); ++k) {
      if (!answered[k] && !m.tool_name.empty() && caller->tool_calls[k].name == m.tool_name) pick = k;
    }
    for (size_t k = 0; k < answered.size() && pick == answered.size(); ++k) {
      if (!answered[k]) pick = k;
    }
    if (pick == answered.size()) continue;  // more results than calls: left for the template
    answered[pick] = true;
    m.tool_call_id = caller->tool_calls[pick].id;
    if (m.tool_name.empty()) m.tool_name = caller->tool_calls[pick].name;
  }
}

Err read_messages(const json& obj, std::vector<backend::ChatMessage>& out) {
  const json* m = json_field(obj, "messages");
  if (!m) return std::nullopt;  // none: load only
  if (!m->is_array())
    return bad("'messages' must be an array of {role, content} objects, got " + type_of(*m));
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    const std::string p = "messages[" + std::to_string(i) + "]";
    if (!msg.is_object()) return bad("'" + p + "' must be an object, got " + type_of(msg));
    backend::ChatMessage cm;
    const json* role = json_field(msg, "role");
    if (!role || !role->is_string() || role->get<std::string>().empty()) {
      return bad("'" + p + ".role' must be a non-empty string (system, user, assistant or tool)");
    }
    cm.role = role->get<std::string>();
    const json* content = json_field(msg, "content");
    if (content) {
      if (!content->is_string()) return bad("'" + p + ".content' must be a string, got " + type_of(*content));
      cm.content = content->get<std::string>();
    }
    GANTRY_TRY_FIELD(refuse_nonempty(msg, "images", "this server runs text models only"));
    GANTRY_TRY_FIELD(read_string(msg, "thinking", cm.reasoning_content));
    GANTRY_TRY_FIELD(read_string(msg, "tool_name", cm.tool_name));
    GANTRY_TRY_FIELD(read_tool_calls(msg, p, i, cm.tool_calls));
    out.push_back(std::move(cm));
  }
  link_tool_results(out);
  return std::nullopt;
}

Err read_tools(const json& obj, std::vector<backend::ToolDefinition>& out) {
  return as_api_error(protocol::read_tools(obj, kOllamaTools, out));
}

// `think`: a boolean, or a level ("high", "medium", "low") read as true.
Err read_think(const json& obj, std::optional<bool>& out) {
  const json* t = json_field(obj, "think");
  if (!t) return std::nullopt;
  if (t->is_boolean()) {
    out = t->get<bool>();
    return std::nullopt;
  }
  if (t->is_string()) {
    const std::string& v = t->get_ref<const std::string&>();
    if (v == "high" || v == "medium" || v == "low") {
      out = true;
      return std::nullopt;
    }
  }
  return bad("'think' must be a boolean (or \"high\", \"medium\", \"low\"), got " + t->dump().substr(0, 40));
}

std::variant<json, ApiError> parse_object(std::string_view body) {
  auto parsed = parse_json_unique_keys(body, "the request body", client_json_limits(body));
  if (!parsed.ok()) return bad(parsed.status().message());
  json& j = *parsed;
  if (!j.is_object()) return bad("the request body must be a JSON object, got " + type_of(j));
  return std::move(j);
}

// "model" (required, non-empty); older clients send "name".
Err read_model(const json& obj, std::string& out) {
  GANTRY_TRY_FIELD(read_string(obj, "model", out));
  if (out.empty()) GANTRY_TRY_FIELD(read_string(obj, "name", out));
  if (out.empty()) return bad("'model' is required: the name of a model (GET /api/tags lists them)");
  return std::nullopt;
}

json details_json(const ModelDetails& d) {
  return {{"parent_model", ""},
          {"format", d.format},
          {"family", d.family},
          {"families", d.family.empty() ? json(nullptr) : json::array({d.family})},
          {"parameter_size", d.parameter_size},
          {"quantization_level", d.quantization_level}};
}

json final_object(std::string_view model, std::string_view created_at, const backend::GenerationResult& r,
                  const Timing& t) {
  return {{"model", model},
          {"created_at", created_at},
          {"done", true},
          {"done_reason", done_reason(r.finish)},
          {"total_duration", t.total_ns},
          {"load_duration", t.load_ns},
          {"prompt_eval_count", r.n_prompt_tokens - r.n_cached_tokens},  // evaluated, as Ollama counts
          {"prompt_eval_duration", t.prompt_eval_ns},
          {"eval_count", static_cast<int64_t>(r.tokens.size())},
          {"eval_duration", t.eval_ns}};
}

json message(std::string_view text) { return {{"role", "assistant"}, {"content", text}}; }

// Tool calls as Ollama answers them: {id, function: {index, name, arguments (an object)}}.
json tool_calls_json(std::span<const backend::ToolCall> calls, size_t first_index) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    const backend::ToolCall& c = calls[i];
    auto parsed =
        parse_json(c.arguments.empty() ? std::string_view("{}") : std::string_view(c.arguments), "arguments");
    // Not JSON (or nested beyond kMaxJsonDepth): the text, rather than losing it.
    json args = parsed.ok() ? std::move(*parsed) : json(c.arguments);
    json call = {
        {"function", {{"index", first_index + i}, {"name", c.name}, {"arguments", std::move(args)}}}};
    if (!c.id.empty()) call["id"] = c.id;
    out.push_back(std::move(call));
  }
  return out;
}

json output_message(const backend::ChatOutput& o) {
  json m = message(o.content);
  if (!o.reasoning_content.empty()) m["thinking"] = o.reasoning_content;
  if (!o.tool_calls.empty()) m["tool_calls"] = tool_calls_json(o.tool_calls, 0);
  return m;
}

// A GGUF metadata value as JSON (arrays: empty unless verbose).
json gguf_value_json(const model::GgufValue& v, bool verbose) {
  using T = model::GgufType;
  switch (v.type()) {
    case T::kString:
      return *v.as_string();
    case T::kBool:
      return *v.as_bool();
    case T::kFloat32:
    case T::kFloat64: {
      const double d = *v.as_float();
      return std::isfinite(d) ? json(d) : json(nullptr);
    }
    case T::kArray: {
      json a = json::array();
      if (!verbose) return a;
      const model::GgufArray& items = *v.as_array();
      for (uint64_t i = 0; i < items.size(); ++i) a.push_back(gguf_value_json(items.at(i), true));
      return a;
    }
    default:
      if (auto u = v.as_uint()) return *u;
      if (auto i = v.as_int()) return *i;
      return nullptr;
  }
}

}  // namespace

std::string error_body(std::string_view message) { return dump_json(json{{"error", message}}); }

std::string stream_error_line(std::string_view message) { return error_body(message) + "\n"; }

Result<milliseconds> parse_duration(std::string_view text) {
  const std::string shown = "'" + std::string(text.substr(0, 64)) + "'";
  auto invalid = [&] {
    return InvalidArgument("invalid duration " + shown +
                           ": use a number of seconds or a number with a unit (ns, us, ms, s, m, h), e.g. "
                           "\"5m\", \"1h30m\", \"0\" or \"-1\"");
  };
  std::string_view s = text;
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (s.empty()) return invalid();
  bool negative = false;
  if (s.front() == '-' || s.front() == '+') {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  if (s.empty()) return invalid();
  double total_ms = 0;
  size_t i = 0;
  while (i < s.size()) {
    const size_t start = i;
    while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.')) ++i;
    if (i == start) return invalid();
    const std::string number(s.substr(start, i - start));
    if (std::count(number.begin(), number.end(), '.') > 1 || number == ".") return invalid();
    const double value = std::strtod(number.c_str(), nullptr);
    const size_t unit_start = i;
    while (i < s.size() && !((s[i] >= '0' && s[i] <= '9') || s[i] == '.')) ++i;
    const std::string_view unit = s.substr(unit_start, i - unit_start);
    double scale_ms = 0;
    if (unit.empty()) {
      if (start != 0 || i != s.size()) return invalid();  // "5m3" has a unit-less tail
      scale_ms = 1000;
    } else if (unit == "ns") {
      scale_ms = 1e-6;
    } else if (unit == "us" || unit == "\xC2\xB5s" || unit == "\xCE\xBCs") {
      scale_ms = 1e-3;
    } else if (unit == "ms") {
      scale_ms = 1;
    } else if (unit == "s") {
      scale_ms = 1000;
    } else if (unit == "m") {
      scale_ms = 60'000;
    } else if (unit == "h") {
      scale_ms = 3'600'000;
    } else {
      return invalid();
    }
    total_ms += value * scale_ms;
  }
  if (negative && total_ms > 0) return milliseconds(-1);
  // Beyond a century is forever (and keeps the value far from overflowing).
  if (!std::isfinite(total_ms) || total_ms > 100.0 * 365 * 24 * 3600 * 1000) return milliseconds(-1);
  return milliseconds(static_cast<int64_t>(std::llround(total_ms)));
}

std::variant<TextRequest, ApiError> parse_text_request(std::string_view body, Endpoint endpoint) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  TextRequest r;
  r.endpoint = endpoint;
  GANTRY_TRY_FIELD(read_model(j, r.model));
  if (endpoint == Endpoint::kGenerate) {
    GANTRY_TRY_FIELD(read_string(j, "prompt", r.prompt));
    GANTRY_TRY_FIELD(read_string(j, "system", r.system));
    GANTRY_TRY_FIELD(read_bool(j, "raw", r.raw));
    GANTRY_TRY_FIELD(refuse_nonempty(j, "suffix", "fill-in-the-middle is not offered by this server"));
    GANTRY_TRY_FIELD(refuse_nonempty(j, "images", "this server runs text models only"));
    GANTRY_TRY_FIELD(refuse_nonempty(j, "context",
                                     "this server does not return or accept token contexts (deprecated in "
                                     "Ollama); send the conversation to /api/chat instead"));
  } else {
    GANTRY_TRY_FIELD(read_messages(j, r.messages));
    GANTRY_TRY_FIELD(read_tools(j, r.tools));
  }
  GANTRY_TRY_FIELD(read_think(j, r.think));
  GANTRY_TRY_FIELD(read_bool(j, "stream", r.stream));
  GANTRY_TRY_FIELD(read_keep_alive(j, r.keep_alive));
  GANTRY_TRY_FIELD(read_format(j, r.generation.constraint));
  GANTRY_TRY_FIELD(read_options(j, r));
  return r;
}

backend::ChatRequest chat_request(const TextRequest& request) {
  backend::ChatRequest c;
  c.messages = request.messages;
  c.tools = request.tools;
  c.tool_choice = backend::ToolChoice::kAuto;
  c.enable_thinking = request.think.value_or(true);
  c.reasoning_format = c.enable_thinking ? backend::ReasoningFormat::kAuto : backend::ReasoningFormat::kNone;
  return c;
}

bool is_load_only(const TextRequest& request) {
  return request.endpoint == Endpoint::kGenerate ? request.prompt.empty() : request.messages.empty();
}

std::variant<EmbedRequest, ApiError> parse_embed_request(std::string_view body, bool legacy) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  EmbedRequest r;
  GANTRY_TRY_FIELD(read_model(j, r.model));
  GANTRY_TRY_FIELD(read_keep_alive(j, r.keep_alive));
  if (legacy) {
    std::string prompt;
    GANTRY_TRY_FIELD(read_string(j, "prompt", prompt));
    r.input.push_back(std::move(prompt));
    return r;
  }
  const json* in = json_field(j, "input");
  if (!in) return bad("'input' is required: a string or an array of strings");
  if (in->is_string()) {
    r.input.push_back(in->get<std::string>());
  } else if (in->is_array()) {
    for (size_t i = 0; i < in->size(); ++i) {
      if (!(*in)[i].is_string()) {
        return bad("'input[" + std::to_string(i) + "]' must be a string, got " + type_of((*in)[i]));
      }
      r.input.push_back((*in)[i].get<std::string>());
    }
  } else {
    return bad("'input' must be a string or an array of strings, got " + type_of(*in));
  }
  GANTRY_TRY_FIELD(read_int(j, "dimensions", "", 1, std::numeric_limits<int32_t>::max(), r.dimensions));
  return r;
}

std::variant<ShowRequest, ApiError> parse_show_request(std::string_view body) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  ShowRequest r;
  GANTRY_TRY_FIELD(read_model(j, r.model));
  GANTRY_TRY_FIELD(read_bool(j, "verbose", r.verbose));
  return r;
}

std::string tagged_name(std::string_view served_name) {
  if (served_name.find(':') != std::string_view::npos) return std::string(served_name);
  return std::string(served_name) + ":latest";
}

std::string untagged_name(std::string_view requested) {
  constexpr std::string_view kLatest = ":latest";
  if (requested.size() > kLatest.size() && requested.ends_with(kLatest)) {
    return std::string(requested.substr(0, requested.size() - kLatest.size()));
  }
  return "";
}

std::string_view done_reason(FinishReason r) { return r == FinishReason::kMaxTokens ? "length" : "stop"; }

std::string rfc3339(std::chrono::system_clock::time_point t) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  int64_t secs = ns / 1'000'000'000;
  int64_t frac = ns % 1'000'000'000;
  if (frac < 0) frac += 1'000'000'000, --secs;
  const std::time_t tt = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%09lldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(frac));
  return buf;
}

std::string generate_chunk(std::string_view model, std::string_view created_at, std::string_view text) {
  return dump_json(json{{"model", model}, {"created_at", created_at}, {"response", text}, {"done", false}}) +
         "\n";
}

std::string chat_chunk(std::string_view model, std::string_view created_at, std::string_view text) {
  return dump_json(json{
             {"model", model}, {"created_at", created_at}, {"message", message(text)}, {"done", false}}) +
         "\n";
}

std::string chat_delta_chunk(std::string_view model, std::string_view created_at,
                             const backend::ChatOutputDelta& delta) {
  if (delta.content.empty() && delta.reasoning_content.empty()) return "";
  json m = message(delta.content);
  if (!delta.reasoning_content.empty()) m["thinking"] = delta.reasoning_content;
  return dump_json(
             json{{"model", model}, {"created_at", created_at}, {"message", std::move(m)}, {"done", false}}) +
         "\n";
}

std::string chat_tool_calls_chunk(std::string_view model, std::string_view created_at,
                                  std::span<const backend::ToolCall> calls, size_t first_index) {
  json m = message("");
  m["tool_calls"] = tool_calls_json(calls, first_index);
  return dump_json(
             json{{"model", model}, {"created_at", created_at}, {"message", std::move(m)}, {"done", false}}) +
         "\n";
}

std::string generate_final(std::string_view model, std::string_view created_at,
                           const backend::GenerationResult& result, const Timing& timing,
                           std::string_view text, bool line) {
  json j = final_object(model, created_at, result, timing);
  j["response"] = text;
  return dump_json(j) + (line ? "\n" : "");
}

std::string chat_final(std::string_view model, std::string_view created_at,
                       const backend::GenerationResult& result, const Timing& timing,
                       const backend::ChatOutput* output, bool line) {
  json j = final_object(model, created_at, result, timing);
  j["message"] = output ? output_message(*output) : message("");
  return dump_json(j) + (line ? "\n" : "");
}

std::string load_response(Endpoint endpoint, std::string_view model, std::string_view created_at,
                          std::string_view reason) {
  json j = {{"model", model}, {"created_at", created_at}, {"done", true}, {"done_reason", reason}};
  if (endpoint == Endpoint::kGenerate) {
    j["response"] = "";
  } else {
    j["message"] = message("");
  }
  return dump_json(j);
}

std::string tags_response(std::span<const ModelEntry> models) {
  json list = json::array();
  for (const auto& m : models) {
    list.push_back({{"name", m.name},
                    {"model", m.name},
                    {"modified_at", m.modified_at},
                    {"size", m.size},
                    {"digest", m.digest},
                    {"details", details_json(m.details)}});
  }
  return dump_json(json{{"models", std::move(list)}});
}

std::string ps_response(std::span<const ModelEntry> models) {
  json list = json::array();
  for (const auto& m : models) {
    list.push_back({{"name", m.name},
                    {"model", m.name},
                    {"size", m.size},
                    {"digest", m.digest},
                    {"details", details_json(m.details)},
                    {"expires_at", m.expires_at},
                    {"size_vram", m.size_vram}});
    if (m.context_length > 0) list.back()["context_length"] = m.context_length;
  }
  return dump_json(json{{"models", std::move(list)}});
}

std::string show_response(const ShowInfo& info) {
  json model_info = json::parse(info.model_info_json, nullptr, false);
  if (model_info.is_discarded() || !model_info.is_object()) model_info = json::object();
  return dump_json(json{{"license", ""},
                        {"modelfile", info.modelfile},
                        {"parameters", info.parameters},
                        {"template", info.template_text},
                        {"details", details_json(info.details)},
                        {"model_info", std::move(model_info)},
                        {"capabilities", info.capabilities},
                        {"modified_at", info.modified_at}});
}

std::string embed_response(std::string_view model, const std::vector<std::vector<float>>& vectors,
                           const Timing& timing, int prompt_tokens) {
  json embeddings = json::array();
  for (const auto& v : vectors) embeddings.push_back(v);
  return dump_json(json{{"model", model},
                        {"embeddings", std::move(embeddings)},
                        {"total_duration", timing.total_ns},
                        {"load_duration", timing.load_ns},
                        {"prompt_eval_count", prompt_tokens}});
}

std::string embeddings_response(const std::vector<float>& vector) {
  return dump_json(json{{"embedding", vector}});
}

void truncate_embeddings(std::vector<std::vector<float>>& vectors, size_t dimensions) {
  for (auto& v : vectors) {
    if (dimensions >= v.size()) continue;
    v.resize(dimensions);
    double norm = 0;
    for (float x : v) norm += static_cast<double>(x) * x;
    norm = std::sqrt(norm);
    if (norm > 0) {
      for (float& x : v) x = static_cast<float>(x / norm);
    }
  }
}

std::string version_response(std::string_view version) { return dump_json(json{{"version", version}}); }

std::string human_count(uint64_t n) {
  struct Scale {
    double value;
    const char* suffix;
  };
  static constexpr Scale kScales[] = {{1e12, "T"}, {1e9, "B"}, {1e6, "M"}};
  for (const auto& s : kScales) {
    if (static_cast<double>(n) >= s.value) {
      const double x = static_cast<double>(n) / s.value;
      char buf[32];
      std::snprintf(buf, sizeof buf, x >= 100 ? "%.0f%s" : "%.1f%s", x, s.suffix);
      return buf;
    }
  }
  if (n >= 1000) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0fK", static_cast<double>(n) / 1e3);
    return buf;
  }
  return std::to_string(n);
}

std::string_view file_type_name(uint64_t file_type) {
  // llama.cpp's llama_ftype numbering (the gaps are types it removed).
  static const std::map<uint64_t, std::string_view> kNames = {
      {0, "F32"},     {1, "F16"},     {2, "Q4_0"},     {3, "Q4_1"},    {7, "Q8_0"},     {8, "Q5_0"},
      {9, "Q5_1"},    {10, "Q2_K"},   {11, "Q3_K_S"},  {12, "Q3_K_M"}, {13, "Q3_K_L"},  {14, "Q4_K_S"},
      {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"},  {18, "Q6_K"},   {19, "IQ2_XXS"}, {20, "IQ2_XS"},
      {21, "Q2_K_S"}, {22, "IQ3_XS"}, {23, "IQ3_XXS"}, {24, "IQ1_S"},  {25, "IQ4_NL"},  {26, "IQ3_S"},
      {27, "IQ3_M"},  {28, "IQ2_S"},  {29, "IQ2_M"},   {30, "IQ4_XS"}, {31, "IQ1_M"},   {32, "BF16"},
      {36, "TQ1_0"},  {37, "TQ2_0"},  {38, "MXFP4"}};
  auto it = kNames.find(file_type);
  return it == kNames.end() ? std::string_view() : it->second;
}

ModelDetails gguf_details(const model::GgufFile& file) {
  ModelDetails d;
  d.format = "gguf";
  d.family = file.architecture();
  uint64_t params = file.get_uint("general.parameter_count").value_or(0);
  if (params == 0) {
    for (const auto& t : file.tensors()) params += t.n_elements;
  }
  if (params > 0) d.parameter_size = human_count(params);
  if (auto ft = file.get_uint("general.file_type")) d.quantization_level = std::string(file_type_name(*ft));
  if (d.quantization_level.empty()) {
    // The type holding the most weight bytes among the matrices (1-D tensors stay F32 in any file).
    std::map<std::string, uint64_t> bytes;
    for (const auto& t : file.tensors()) {
      if (t.dims.size() >= 2) bytes[std::string(t.type.name)] += t.size_bytes;
    }
    auto best = std::max_element(bytes.begin(), bytes.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
    if (best != bytes.end()) {
      d.quantization_level = best->first;
      for (char& c : d.quantization_level) {
        if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
      }
    }
  }
  return d;
}

std::string gguf_model_info(const model::GgufFile& file, bool verbose) {
  json info = json::object();
  for (const auto& [key, value] : file.metadata()) {
    // The chat template is /api/show's "template"; Ollama leaves it out of model_info too.
    if (key == "tokenizer.chat_template") continue;
    info[key] = gguf_value_json(value, verbose);
  }
  return dump_json(info);
}

std::variant<CopyRequest, ApiError> parse_copy_request(std::string_view body) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  CopyRequest r;
  GANTRY_TRY_FIELD(read_string(j, "source", r.source));
  GANTRY_TRY_FIELD(read_string(j, "destination", r.destination));
  if (r.source.empty()) return bad("'source' is required: the name of the model to copy");
  if (r.destination.empty()) return bad("'destination' is required: the model's new name");
  return r;
}

std::variant<DeleteRequest, ApiError> parse_delete_request(std::string_view body) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  DeleteRequest r;
  GANTRY_TRY_FIELD(read_model(std::get<json>(parsed), r.model));
  return r;
}

std::variant<PullRequest, ApiError> parse_pull_request(std::string_view body) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  PullRequest r;
  GANTRY_TRY_FIELD(read_model(j, r.model));
  GANTRY_TRY_FIELD(read_bool(j, "stream", r.stream));
  bool insecure = false;
  GANTRY_TRY_FIELD(read_bool(j, "insecure", insecure));
  return r;
}

namespace {

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.';
}

// A name part: 1 to 128 name characters, not starting with '.' or '-'.
bool valid_part(std::string_view p) {
  if (p.empty() || p.size() > 128 || p.front() == '.' || p.front() == '-') return false;
  return std::all_of(p.begin(), p.end(), name_char);
}

}  // namespace

Result<ModelPath> parse_model_path(std::string_view name) {
  ModelPath m;
  std::string_view rest = name;
  const size_t slash = rest.rfind('/');
  const size_t colon = rest.rfind(':');
  if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash)) {
    m.tag = std::string(rest.substr(colon + 1));
    rest = rest.substr(0, colon);
  }
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t end = rest.find('/', start);
    parts.push_back(rest.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  const std::string shown = "'" + std::string(name.substr(0, 200)) + "'";
  if (parts.size() > 3)
    return InvalidArgument("model name " + shown + " has more than 3 '/'-separated parts");
  m.model = std::string(parts.back());
  if (parts.size() >= 2) m.name_space = std::string(parts[parts.size() - 2]);
  if (parts.size() == 3) m.host = std::string(parts[0]);
  if (!valid_part(m.model))
    return InvalidArgument("model name " + shown +
                           ": the model part must be 1 to 128 letters, digits, '_', '-' or '.'");
  if (!valid_part(m.name_space))
    return InvalidArgument("model name " + shown +
                           ": the namespace must be 1 to 128 letters, digits, '_', '-' or '.'");
  if (!valid_part(m.tag))
    return InvalidArgument("model name " + shown +
                           ": the tag must be 1 to 128 letters, digits, '_', '-' or '.'");
  const bool host_ok =
      !m.host.empty() && m.host.size() <= 253 && m.host.front() != '.' && m.host.front() != '-' &&
      std::all_of(m.host.begin(), m.host.end(), [](char c) { return name_char(c) || c == ':'; });
  if (!host_ok) return InvalidArgument("model name " + shown + ": the registry host is not a host name");
  return m;
}

std::string served_name(const ModelPath& path) {
  std::string name = path.name_space == "library" ? path.model : path.name_space + "-" + path.model;
  if (path.tag != "latest") name += ":" + path.tag;
  return name;
}

bool valid_model_name(std::string_view name) {
  const size_t colon = name.find(':');
  if (colon == std::string_view::npos) return valid_part(name);
  return valid_part(name.substr(0, colon)) && valid_part(name.substr(colon + 1));
}

Result<ModelLayer> model_layer(std::string_view manifest_json) {
  // From a pull source: untrusted bytes, bounded as a request body.
  auto parsed = parse_json(manifest_json, "the manifest", client_json_limits(manifest_json));
  if (!parsed.ok() || !parsed->is_object()) return Corrupt("the manifest is not a JSON object");
  const json& m = *parsed;
  const json* layers = json_field(m, "layers");
  if (!layers || !layers->is_array()) return Corrupt("the manifest has no 'layers' array");
  for (const json& l : *layers) {
    if (!l.is_object()) continue;
    const json* type = json_field(l, "mediaType");
    if (!type || !type->is_string() || *type != "application/vnd.ollama.image.model") continue;
    const json* digest = json_field(l, "digest");
    const json* size = json_field(l, "size");
    if (!digest || !digest->is_string()) return Corrupt("the model layer has no 'digest'");
    const std::string d = digest->get<std::string>();
    constexpr std::string_view kPrefix = "sha256:";
    const bool hex = d.size() == kPrefix.size() + 64 && d.starts_with(kPrefix) &&
                     std::all_of(d.begin() + kPrefix.size(), d.end(),
                                 [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
    if (!hex)
      return Corrupt("the model layer's digest '" + d.substr(0, 80) + "' is not sha256:<64 hex digits>");
    if (!size || !size->is_number_unsigned()) return Corrupt("the model layer has no 'size'");
    return ModelLayer{d, size->get<uint64_t>()};
  }
  return Corrupt("the manifest has no model layer (mediaType application/vnd.ollama.image.model)");
}

std::string pull_status(std::string_view status, bool line) {
  return dump_json(json{{"status", status}}) + (line ? "\n" : "");
}

std::string pull_progress(std::string_view digest, uint64_t total, uint64_t completed) {
  const std::string_view hex =
      digest.substr(digest.find(':') == std::string_view::npos ? 0 : digest.find(':') + 1);
  return dump_json(json{{"status", "pulling " + std::string(hex.substr(0, 12))},
                        {"digest", digest},
                        {"total", total},
                        {"completed", completed}}) +
         "\n";
}

}  // namespace gantry::protocol::ollama
