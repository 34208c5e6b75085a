#include "gantry/protocol/llama_server_codec.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "gantry/core/json.h"
#include "gantry/core/json_reader.h"
#include "gantry/core/utf8.h"

namespace gantry::protocol::llama_server {
namespace {

using nlohmann::json;
using Err = std::optional<openai::ApiError>;

openai::ApiError bad(std::string param, std::string message) {
  openai::ApiError e;
  e.param = std::move(param);
  e.message = std::move(message);
  return e;
}

Err field(const JsonFieldCheck& c) {
  if (!c) return std::nullopt;
  return bad(c->field, c->quoted());
}

#define GANTRY_TRY(expr) \
  if (auto gantry_err_ = (expr)) return *gantry_err_

std::variant<json, openai::ApiError> parse_object(std::string_view body) {
  auto parsed = parse_json_unique_keys(body, "the request body", client_json_limits(body));
  if (!parsed.ok()) return bad("", parsed.status().message());
  if (!parsed->is_object())
    return bad("", std::string("the request body must be a JSON object, got ") + parsed->type_name());
  return std::move(*parsed);
}

// A prompt: a string, token ids, or an array mixing strings and ids (llama-server's "mixed" prompt).
Err read_prompt(const json& j, const char* key, std::vector<PromptPart>& out) {
  const json* p = json_field(j, key);
  if (!p) return std::nullopt;
  if (p->is_string()) {
    out.push_back({p->get<std::string>(), {}, true});
    return std::nullopt;
  }
  if (!p->is_array())
    return bad(key, std::string("'") + key + "' must be a string, token ids or a list of both, got " +
                        p->type_name());
  // [[...]] or ["a", "b"] (several prompts): llama-server answers one result per prompt; here one.
  const bool nested = !p->empty() && (*p)[0].is_array();
  const json& items = nested && p->size() == 1 ? (*p)[0] : *p;
  if (nested && p->size() > 1)
    return bad(key, std::string("'") + key + "' holds several prompts: send one per request");
  size_t strings = 0;
  for (const auto& v : items) strings += v.is_string();
  if (strings > 1 && strings == items.size())
    return bad(key, std::string("'") + key + "' holds several prompts: send one per request");
  for (size_t i = 0; i < items.size(); ++i) {
    const json& v = items[i];
    if (v.is_string()) {
      out.push_back({v.get<std::string>(), {}, true});
    } else if (v.is_number_integer()) {
      if (out.empty() || out.back().is_text) out.push_back({"", {}, false});
      const int64_t id = v.get<int64_t>();
      if (id < 0 || id > INT32_MAX)
        return bad(key,
                   std::string("'") + key + "[" + std::to_string(i) + "]' is not a token id: " + v.dump());
      out.back().tokens.push_back(static_cast<int32_t>(id));
    } else {
      return bad(key, std::string("'") + key + "[" + std::to_string(i) +
                          "]' must be a string or a token id, got " + v.type_name());
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<openai::ApiError> read_extensions(const json& j, backend::GenerationRequest& g) {
  std::optional<int64_t> top_k, repeat_last_n, n_predict;
  GANTRY_TRY(field(read_json_int(j, "n_predict", "", -2, 1 << 24, n_predict)));
  if (n_predict && *n_predict > 0 && g.max_tokens <= 0) g.max_tokens = static_cast<int>(*n_predict);
  std::optional<double> min_p, repeat_penalty;
  GANTRY_TRY(field(read_json_int(j, "top_k", "", 0, 1 << 20, top_k)));
  GANTRY_TRY(field(read_json_number(j, "min_p", "", 0.0, 1.0, min_p)));
  GANTRY_TRY(field(read_json_int(j, "repeat_last_n", "", -1, 1 << 24, repeat_last_n)));
  GANTRY_TRY(field(read_json_number(j, "repeat_penalty", "", 1e-6, 100.0, repeat_penalty)));
  if (top_k) g.sampling.top_k = static_cast<int>(*top_k);
  if (min_p) g.sampling.min_p = static_cast<float>(*min_p);
  if (repeat_last_n) g.sampling.repeat_last_n = static_cast<int>(*repeat_last_n);
  if (repeat_penalty) g.sampling.repeat_penalty = static_cast<float>(*repeat_penalty);
  std::string grammar;
  GANTRY_TRY(field(read_json_string(j, "grammar", "", grammar)));
  const json* schema = json_field(j, "json_schema");
  if (schema && !schema->is_object())
    return bad("json_schema",
               std::string("'json_schema' must be a JSON schema object, got ") + schema->type_name());
  if (schema && !grammar.empty()) return bad("grammar", "'grammar' and 'json_schema' cannot both be given");
  if ((schema || !grammar.empty()) && g.constraint.kind != backend::OutputConstraint::Kind::kNone)
    return bad(schema ? "json_schema" : "grammar",
               std::string("'") + (schema ? "json_schema" : "grammar") +
                   "' and 'response_format' cannot both constrain the output");
  if (!grammar.empty()) {
    g.constraint = backend::OutputConstraint(backend::OutputConstraint::Kind::kGrammar);
    g.constraint.grammar = std::move(grammar);
  } else if (schema) {
    g.constraint =
        backend::OutputConstraint(backend::OutputConstraint::Kind::kJsonSchema, dump_json(*schema));
  }
  return std::nullopt;
}

std::optional<openai::ApiError> read_chat_extensions(const json& j, backend::ChatRequest& chat) {
  GANTRY_TRY(field(read_json_bool(j, "add_generation_prompt", "", chat.add_assistant_turn)));
  if (const json* kw = json_field(j, "chat_template_kwargs")) {
    if (!kw->is_object())
      return bad("chat_template_kwargs",
                 std::string("'chat_template_kwargs' must be an object, got ") + kw->type_name());
    GANTRY_TRY(field(read_json_bool(*kw, "enable_thinking", "chat_template_kwargs", chat.enable_thinking)));
  }
  return std::nullopt;
}

std::variant<CompletionRequest, openai::ApiError> parse_completion_request(
    std::string_view body, const backend::SamplingParams& defaults, bool infill) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<openai::ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  CompletionRequest r;
  backend::GenerationRequest& g = r.generation;
  g.sampling = defaults;
  GANTRY_TRY(field(read_json_string(j, "model", "", r.model)));
  GANTRY_TRY(read_prompt(j, "prompt", r.prompt));
  if (infill) {
    if (!json_field(j, "input_prefix"))
      return bad("input_prefix", "'input_prefix' is required: the code before the gap");
    if (!json_field(j, "input_suffix"))
      return bad("input_suffix", "'input_suffix' is required: the code after the gap");
    GANTRY_TRY(field(read_json_string(j, "input_prefix", "", r.input_prefix)));
    GANTRY_TRY(field(read_json_string(j, "input_suffix", "", r.input_suffix)));
    if (const json* extra = json_field(j, "input_extra")) {
      if (!extra->is_array()) return bad("input_extra", "'input_extra' must be an array of {filename, text}");
      for (size_t i = 0; i < extra->size(); ++i) {
        const json& c = (*extra)[i];
        const json* text = c.is_object() ? json_field(c, "text") : nullptr;
        if (!text || !text->is_string())
          return bad("input_extra", "'input_extra[" + std::to_string(i) + "].text' must be a string");
        std::string chunk;
        if (const json* f = json_field(c, "filename"); f && f->is_string())
          chunk = f->get<std::string>() + "\n";
        r.input_extra.push_back(chunk + text->get<std::string>());
      }
    }
  } else if (r.prompt.empty()) {
    return bad("prompt", "'prompt' is required: a string, token ids or a list of both");
  }
  GANTRY_TRY(field(read_json_bool(j, "stream", "", r.stream)));
  GANTRY_TRY(field(read_json_bool(j, "return_tokens", "", r.return_tokens)));
  std::optional<int64_t> n_predict, max_tokens, seed, n_probs;
  GANTRY_TRY(field(read_json_int(j, "n_predict", "", -2, 1 << 24, n_predict)));
  GANTRY_TRY(field(read_json_int(j, "max_tokens", "", -2, 1 << 24, max_tokens)));
  if (!n_predict) n_predict = max_tokens;
  if (n_predict && *n_predict >= 0) r.n_predict = static_cast<int>(*n_predict);
  std::optional<double> temperature, top_p, presence, frequency;
  GANTRY_TRY(field(read_json_number(j, "temperature", "", -1e9, 1e9, temperature)));
  GANTRY_TRY(field(read_json_number(j, "top_p", "", 0.0, 1.0, top_p)));
  GANTRY_TRY(field(read_json_number(j, "presence_penalty", "", -2.0, 2.0, presence)));
  GANTRY_TRY(field(read_json_number(j, "frequency_penalty", "", -2.0, 2.0, frequency)));
  GANTRY_TRY(field(read_json_int(j, "seed", "", INT64_MIN, INT64_MAX, seed)));
  if (temperature) g.sampling.temperature = static_cast<float>(std::max(0.0, *temperature));  // <= 0: greedy
  if (top_p) g.sampling.top_p = *top_p == 0.0 ? 1.0f : static_cast<float>(*top_p);
  if (top_p && *top_p == 0.0) g.sampling.temperature = 0;
  if (presence) g.sampling.presence_penalty = static_cast<float>(*presence);
  if (frequency) g.sampling.frequency_penalty = static_cast<float>(*frequency);
  if (seed) g.sampling.seed = *seed < 0 ? 0xFFFFFFFFu : static_cast<uint32_t>(*seed);
  GANTRY_TRY(field(read_json_strings(j, "stop", "", g.stop, backend::kMaxStopSequences)));
  GANTRY_TRY(field(read_json_bool(j, "cache_prompt", "", g.cache_prompt)));
  GANTRY_TRY(field(read_json_bool(j, "ignore_eos", "", g.ignore_eos)));
  GANTRY_TRY(read_extensions(j, g));
  GANTRY_TRY(field(read_json_int(j, "n_probs", "", 0, 20, n_probs)));
  if (n_probs && *n_probs > 0) r.n_probs = static_cast<int>(*n_probs);
  if (r.n_probs > 0) g.n_logprobs = r.n_probs;
  if (r.return_tokens && g.n_logprobs < 0) g.n_logprobs = 0;  // the ids ride on the pieces
  return r;
}

json timings_json(const Timings& t) {
  auto per = [](double ms, int n) { return n > 0 ? ms / n : 0.0; };
  auto rate = [](double ms, int n) { return ms > 0 ? 1e3 * n / ms : 0.0; };
  return json{{"cache_n", t.cache_n},
              {"prompt_n", t.prompt_n},
              {"prompt_ms", t.prompt_ms},
              {"prompt_per_token_ms", per(t.prompt_ms, t.prompt_n)},
              {"prompt_per_second", rate(t.prompt_ms, t.prompt_n)},
              {"predicted_n", t.predicted_n},
              {"predicted_ms", t.predicted_ms},
              {"predicted_per_token_ms", per(t.predicted_ms, t.predicted_n)},
              {"predicted_per_second", rate(t.predicted_ms, t.predicted_n)}};
}

Timings timings_of(const backend::GenerationResult& r) {
  Timings t;
  t.cache_n = r.n_cached_tokens;
  t.prompt_n = r.n_prompt_tokens - r.n_cached_tokens;
  t.prompt_ms = r.prompt_ms;
  t.predicted_n = backend::completion_tokens(r);
  t.predicted_ms = r.generation_ms;
  return t;
}

std::string_view stop_type(backend::FinishReason f) {
  switch (f) {
    case backend::FinishReason::kEndOfGeneration:
      return "eos";
    case backend::FinishReason::kMaxTokens:
      return "limit";
    case backend::FinishReason::kStopString:
      return "word";
    default:
      return "none";
  }
}

namespace {

json token_bytes(std::string_view s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

json probabilities(std::span<const backend::TokenLogprob> tokens) {
  json out = json::array();
  for (const auto& t : tokens) {
    json top = json::array();
    for (const auto& [text, lp] : t.top)
      top.push_back({{"id", -1}, {"token", text}, {"logprob", lp}, {"bytes", token_bytes(text)}});
    out.push_back({{"id", t.token},
                   {"token", t.text},
                   {"logprob", t.logprob},
                   {"bytes", token_bytes(t.text)},
                   {"top_logprobs", std::move(top)}});
  }
  return out;
}

json settings(const CompletionRequest& req) {
  const auto& s = req.generation.sampling;
  // The request's biases (-inf as null, as llama-server writes it); ignore_eos bans the end-of-generation
  // tokens in the sampler instead, so they are not listed.
  json bias = json::array();
  for (const auto& [token, b] : s.logit_bias)
    bias.push_back({{"token", token}, {"bias", std::isfinite(b) ? json(b) : json(nullptr)}});
  return json{{"seed", s.seed},
              {"logit_bias", std::move(bias)},
              {"temperature", s.temperature},
              {"top_k", s.top_k},
              {"top_p", s.top_p},
              {"min_p", s.min_p},
              {"repeat_last_n", s.repeat_last_n},
              {"repeat_penalty", s.repeat_penalty},
              {"presence_penalty", s.presence_penalty},
              {"frequency_penalty", s.frequency_penalty},
              {"n_predict", req.generation.max_tokens},
              {"max_tokens", req.generation.max_tokens},
              {"n_probs", req.n_probs},
              {"ignore_eos", req.generation.ignore_eos},
              {"stream", req.stream},
              {"stop", req.generation.stop}};
}

}  // namespace

std::string completion_response(const CompletionRequest& req, std::string_view model, std::string_view prompt,
                                const backend::GenerationResult& r, bool stream) {
  const std::string content = stream ? std::string() : r.text;
  json out = {{"index", 0},
              {"content", content},
              {"tokens", req.return_tokens && !stream ? json(r.tokens) : json::array()},
              {"id_slot", 0},
              {"stop", true},
              {"model", model},
              {"tokens_predicted", backend::completion_tokens(r)},
              {"tokens_evaluated", r.n_prompt_tokens},
              {"generation_settings", settings(req)},
              {"prompt", prompt},
              {"has_new_line", r.text.find('\n') != std::string::npos},
              {"truncated", false},
              {"stop_type", stop_type(r.finish)},
              {"stopping_word", ""},
              {"tokens_cached", r.n_prompt_tokens + backend::completion_tokens(r)},
              {"timings", timings_json(timings_of(r))}};
  if (!stream && req.n_probs > 0) out["completion_probabilities"] = probabilities(r.logprobs);
  return dump_json(out);
}

std::string completion_chunk(const CompletionRequest& req, std::string_view text,
                             std::span<const backend::TokenLogprob> tokens, int predicted, int evaluated) {
  json ids = json::array();
  if (req.return_tokens)
    for (const auto& t : tokens) ids.push_back(t.token);
  json out = {{"index", 0},
              {"content", text},
              {"tokens", std::move(ids)},
              {"stop", false},
              {"id_slot", -1},
              {"tokens_predicted", predicted},
              {"tokens_evaluated", evaluated}};
  if (req.n_probs > 0 && !tokens.empty()) out["completion_probabilities"] = probabilities(tokens);
  return sse(dump_json(out));
}

std::string sse(const std::string& data) { return "data: " + data + "\n\n"; }

std::string tokenize_response(std::span<const int32_t> tokens, const std::vector<std::string>* pieces) {
  json list = json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (!pieces) {
      list.push_back(tokens[i]);
      continue;
    }
    const std::string& p = (*pieces)[i];
    list.push_back({{"id", tokens[i]}, {"piece", is_valid_utf8(p) ? json(p) : token_bytes(p)}});
  }
  return dump_json(json{{"tokens", std::move(list)}});
}

std::variant<TokenizeRequest, openai::ApiError> parse_tokenize_request(std::string_view body) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<openai::ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  TokenizeRequest r;
  GANTRY_TRY(field(read_json_string(j, "model", "", r.model)));
  if (!json_field(j, "content")) return bad("content", "'content' is required: the text to tokenize");
  GANTRY_TRY(field(read_json_string(j, "content", "", r.content)));
  GANTRY_TRY(field(read_json_bool(j, "add_special", "", r.add_special)));
  GANTRY_TRY(field(read_json_bool(j, "parse_special", "", r.parse_special)));
  GANTRY_TRY(field(read_json_bool(j, "with_pieces", "", r.with_pieces)));
  return r;
}

std::variant<std::vector<int32_t>, openai::ApiError> parse_detokenize_request(std::string_view body) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<openai::ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  std::vector<int32_t> out;
  const json* t = json_field(j, "tokens");
  if (!t) return out;
  if (!t->is_array())
    return bad("tokens", std::string("'tokens' must be an array of token ids, got ") + t->type_name());
  for (size_t i = 0; i < t->size(); ++i) {
    const json& v = (*t)[i];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
      return bad("tokens", "'tokens[" + std::to_string(i) + "]' is not a token id: " + v.dump());
    out.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return out;
}

std::string props_response(const Props& p) {
  const auto& s = p.sampling;
  json params = {{"seed", s.seed},
                 {"temperature", s.temperature},
                 {"top_k", s.top_k},
                 {"top_p", s.top_p},
                 {"min_p", s.min_p},
                 {"repeat_last_n", s.repeat_last_n},
                 {"repeat_penalty", s.repeat_penalty},
                 {"presence_penalty", s.presence_penalty},
                 {"frequency_penalty", s.frequency_penalty},
                 {"n_predict", p.n_predict_default},
                 {"max_tokens", p.n_predict_default}};
  json out = {{"default_generation_settings", {{"n_ctx", p.n_ctx_slot}, {"params", std::move(params)}}},
              {"total_slots", p.total_slots},
              {"model_alias", p.model_alias},
              {"model_path", p.model_path},
              {"modalities", {{"vision", false}, {"audio", false}}},
              {"chat_template", p.chat_template},
              {"chat_template_caps", {{"supports_tools", p.chat_template_tools}}},
              {"endpoint_slots", false},
              {"endpoint_props", false},
              {"endpoint_metrics", true},
              {"is_sleeping", false},
              {"build_info", p.build_info}};
  return dump_json(out);
}

}  // namespace gantry::protocol::llama_server
