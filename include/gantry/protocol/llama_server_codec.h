// llama-server's own API (llama.cpp tools/server, README "API Endpoints"), the bodies only:
//   POST /completion, /completions  its native completion, plain or streamed (SSE "data: {...}", no [DONE])
//   POST /tokenize, /detokenize     {"content", "add_special"?, "parse_special"?, "with_pieces"?} ->
//                                   {"tokens": [id | {"id", "piece"}]}; {"tokens": [id]} -> {"content"}
//   POST /apply-template            an OpenAI chat body -> {"prompt"}
//   POST /infill                    {"input_prefix", "input_suffix", "input_extra"?, "prompt"?} +
//   /completion's GET  /props, /health            the server's settings; {"status": "ok"}
// and the request fields llama-server takes on its OpenAI routes too (read_extensions). Pure functions:
// no I/O, no model; errors are OpenAI-shaped (llama-server answers {"error": {"code", "message", "type"}}
// the same way), 400 naming the field.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gantry/backend/generation.h"
#include "gantry/protocol/openai_codec.h"

namespace gantry::protocol::llama_server {

// llama-server's sampling and constraint fields, where a request gives them: n_predict (the length when
// the request gives no max_tokens, g.max_tokens <= 0), top_k, min_p,
// repeat_penalty, repeat_last_n, presence/frequency_penalty, grammar (GBNF; root rule "root") and a
// top-level json_schema (a JSON schema object) -> g.constraint (at most one constraint: with
// response_format too, 400). Shared by the OpenAI routes and /completion.
std::optional<openai::ApiError> read_extensions(const nlohmann::json& body, backend::GenerationRequest& g);

// llama-server's chat fields: add_generation_prompt (bool, default true) -> add_assistant_turn,
// chat_template_kwargs.enable_thinking (bool) -> enable_thinking.
std::optional<openai::ApiError> read_chat_extensions(const nlohmann::json& body, backend::ChatRequest& chat);

// One piece of a prompt: text (tokenized by the server) or token ids.
struct PromptPart {
  std::string text;
  std::vector<int32_t> tokens;
  bool is_text = true;
};

struct CompletionRequest {
  std::string model;               // optional: the server's one model
  std::vector<PromptPart> prompt;  // "prompt": a string, token ids, or a list mixing both
  bool stream = false;
  int n_probs = 0;             // completion_probabilities with this many alternatives (0: none)
  bool return_tokens = false;  // the generated ids in "tokens"
  int n_predict = -1;          // -1: the server's default
  // /infill: the code around the gap and the text before the cursor ("prompt").
  std::string input_prefix, input_suffix;
  std::vector<std::string> input_extra;   // the texts of "input_extra": [{"filename"?, "text"}]
  backend::GenerationRequest generation;  // sampling from `defaults` and the request, stop, constraint
};

// /completion's body. `defaults`: the server's sampling (--temp, --seed, ...) where the request sets none.
// `infill`: /infill's body (input_prefix and input_suffix required; prompt optional).
std::variant<CompletionRequest, openai::ApiError> parse_completion_request(
    std::string_view body, const backend::SamplingParams& defaults, bool infill = false);

struct Timings {
  int prompt_n = 0, predicted_n = 0, cache_n = 0;
  double prompt_ms = 0, predicted_ms = 0;
};
// {"cache_n", "prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second", "predicted_n", ...}
nlohmann::json timings_json(const Timings& t);
Timings timings_of(const backend::GenerationResult& r);

// "eos", "limit", "word" (a stop string) or "none" (cancelled).
std::string_view stop_type(backend::FinishReason f);

// The final answer (and, with `stream`, the last event's data): content, tokens, stop true, model,
// tokens_predicted/evaluated, generation_settings, prompt, stop_type, tokens_cached, timings and (with
// n_probs) completion_probabilities.
std::string completion_response(const CompletionRequest& req, std::string_view model, std::string_view prompt,
                                const backend::GenerationResult& r, bool stream);
// One streamed piece: "data: {content, tokens, stop: false, ...}\n\n" (with completion_probabilities for
// its tokens when n_probs > 0).
std::string completion_chunk(const CompletionRequest& req, std::string_view text,
                             std::span<const backend::TokenLogprob> tokens, int predicted, int evaluated);
// "data: {...}\n\n" for the final event.
std::string sse(const std::string& data);

// {"tokens": [...]} from ids, or with pieces [{"id", "piece"}] (a piece that is not valid UTF-8 is
// written as its bytes, an array of numbers, as llama-server does).
std::string tokenize_response(std::span<const int32_t> tokens, const std::vector<std::string>* pieces);

struct TokenizeRequest {
  std::string model;  // optional
  std::string content;
  bool add_special = false, parse_special = true, with_pieces = false;
};
std::variant<TokenizeRequest, openai::ApiError> parse_tokenize_request(std::string_view body);
// {"tokens": [ids]} (a non-array or a non-integer id: 400).
std::variant<std::vector<int32_t>, openai::ApiError> parse_detokenize_request(std::string_view body);

// The settings /props reports.
struct Props {
  std::string model_path, model_alias, build_info, chat_template;
  int total_slots = 1;
  int64_t n_ctx_slot = 0;
  int n_predict_default = -1;
  backend::SamplingParams sampling;
  bool chat_template_tools = false;
};
std::string props_response(const Props& p);

}  // namespace gantry::protocol::llama_server
