// The OpenAI-compatible HTTP API's bodies: parses requests (/v1/chat/completions, /v1/completions,
// /v1/embeddings) into backend requests and writes responses, stream chunks (server-sent events)
// and errors. Pure functions of their arguments: no I/O, no model.
//
// Compatibility notes:
// - "n" (1..128) choices of one prompt: the server refuses more than the model's parallel sequences
//   (400, param "n"). Each choice is its own "choices[i]" with "index" i, in bodies and stream chunks.
// - Tools: "tools" (type "function" only), "tool_choice" ("auto", "none", "required" or
//   {"type":"function","function":{"name":..}}), "parallel_tool_calls"; assistant messages with
//   "tool_calls" and "tool" messages with "tool_call_id" in the history. The answer's tool calls come
//   back as message.tool_calls (arguments as a JSON string) with finish_reason "tool_calls"; streamed,
//   each call's first delta carries index, id, type and name, then arguments in fragments.
// - Content parts other than text (images, audio, files) are refused (400 naming the part).
// - Unknown fields are ignored (clients send many optional ones); known fields of the wrong type or
//   out of range are refused with 400 naming the field (ApiError::param).
// - finish_reason: end-of-generation and stop strings are "stop", max_tokens is "length"; a
//   cancelled generation is reported as "stop" too (the client asked for it, or went away; OpenAI
//   clients only accept stop/length/content_filter/tool_calls/function_call).
// - JSON is written with invalid UTF-8 replaced by U+FFFD (a token may be part of a character);
//   the logprobs' `bytes` fields carry the exact bytes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gantry/backend/chat.h"
#include "gantry/backend/chat_generation.h"
#include "gantry/backend/generation.h"

namespace gantry::protocol::openai {

// An error as OpenAI reports it: HTTP status plus {"error":{message,type,param,code}}.
struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending request field ("" = null)
  std::string code;   // "" = null
};

// {"error":{"message":..,"type":..,"param":..|null,"code":..|null}}
std::string error_body(const ApiError& e);

// The ApiError for a failed Status (e.g. from start_generation or embed): InvalidArgument and
// Unsupported -> 400 invalid_request_error, with code "context_length_exceeded" for a prompt longer
// than the context (backend::is_context_length_exceeded); ResourceExhausted (a full queue or KV
// cache) -> 429 rate_limit_error; NotFound -> 404; Unavailable and Cancelled -> 503 server_error;
// anything else -> 500 server_error. `param` names the request field when the caller knows it (e.g.
// "response_format" for a refused schema).
ApiError api_error(const Status& status, std::string param = "");
// A chat backend::prepare_chat refused, for the OpenAI family (chat, Responses): api_error with `param`
// (the refused part in the request's own spelling), and code "model_not_text_generation" when the
// model generates no text (field "model").
ApiError chat_refusal_error(const backend::ChatRefusal& refusal, std::string param);

enum class Endpoint { kChat, kCompletion };

struct TextRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::string model;
  // kChat: the conversation ("content" may be a string, null, or an array of {"type":"text","text"}
  // parts, which are concatenated; roles system, developer, user, assistant, tool), the tools and
  // the tool choice. "reasoning_effort": "none" turns a thinking template's thinking off.
  backend::ChatRequest chat;
  // kCompletion: the prompt ("prompt" is a string or an array holding exactly one string), or its token
  // ids (prompt_tokens, non-empty: "prompt" is an array of token ids, or an array holding one).
  std::string prompt;
  std::vector<int32_t> prompt_tokens;
  bool stream = false;
  bool store = false;  // kChat: "store": kept for GET /v1/chat/completions/{id} (the server's bounded store)
  bool include_usage = false;  // stream_options.include_usage: send usage_chunk before [DONE]
  // kChat: "logprobs" (bool) + "top_logprobs" (0..20, needs logprobs). kCompletion: "logprobs"
  // (int 0..5) sets both: logprobs = true, top_logprobs = that value.
  bool logprobs = false;
  int top_logprobs = 0;
  // Filled from the request:
  //   max_tokens (chat also max_completion_tokens, which wins) -> max_tokens, >= 1;
  //     0 when the request gives none: the server picks the default (the model's setting).
  //   temperature (0..2), top_p ((0,1]), seed (integer; taken modulo 2^32), presence_penalty and
  //     frequency_penalty (-2..2), repetition_penalty or repeat_penalty (> 0; llama-server's and
  //     vLLM's names), logit_bias ({"token id": bias -100..100; -100 bans the token (-inf); ids
  //     outside the vocabulary are refused when the generation starts) -> sampling; the other
  //     sampling fields keep
  //     SamplingParams' defaults.
  //   n (1..128) -> n_choices.
  //   stop (a string or an array of up to 4 strings) -> stop.
  //   response_format {"type":"text"|"json_object"|"json_schema","json_schema":{"schema":{..}}}
  //     -> constraint (the schema is kept as JSON text; the backend checks what it supports).
  //   logprobs -> n_logprobs (top_logprobs, or -1 when logprobs is off).
  //   cache_prompt (bool, llama-server's extension; default true) -> cache_prompt: false evaluates
  //     the whole prompt again instead of reusing a slot's cached prefix.
  //   ignore_eos (bool, llama-server's extension; default false) -> ignore_eos: true generates
  //     exactly max_tokens (no end-of-generation token is sampled), as benchmarks need.
  // prompt/tokens/callbacks are left for the server (it formats chat messages with the model's
  // template).
  backend::GenerationRequest generation;
};

// `defaults`: the server's sampling where the request sets none (--temp, --seed, ...). llama-server's
// fields (top_k, min_p, grammar, a top-level json_schema, n_probs) are read too
// (llama_server::read_extensions).
std::variant<TextRequest, ApiError> parse_text_request(std::string_view body, Endpoint endpoint,
                                                       const backend::SamplingParams& defaults = {});

struct EmbeddingRequest {
  std::string model;
  std::vector<std::string> input;  // "input": a string or a non-empty array of strings
  bool base64 = false;             // "encoding_format": "float" (default) or "base64"
};

std::variant<EmbeddingRequest, ApiError> parse_embedding_request(std::string_view body);

// "stop" or "length" (see the compatibility notes above).
std::string_view finish_reason(backend::FinishReason r);

// "stop", "length" or, when the answer calls tools, "tool_calls".
std::string_view chat_finish_reason(backend::FinishReason r, const backend::ChatOutput& output);

// Non-streaming bodies ("chat.completion" / "text_completion"): one choice per
// backend::choice_results(result), with usage (the prompt once, every choice's tokens). Logprobs
// are included when `request.logprobs` (from each choice's `logprobs`; chat: logprobs.content[],
// completions: tokens/token_logprobs/top_logprobs/text_offset), else null. A chat choice's message
// is its `outputs[i]` (the parsed answer: content, reasoning_content, tool_calls); one per choice.
std::string chat_response(std::string_view id, std::string_view model, int64_t created,
                          const backend::GenerationResult& result,
                          std::span<const backend::ChatOutput> outputs, const TextRequest& request);
// One choice.
std::string chat_response(std::string_view id, std::string_view model, int64_t created,
                          const backend::GenerationResult& result, const backend::ChatOutput& output,
                          const TextRequest& request);
std::string completion_response(std::string_view id, std::string_view model, int64_t created,
                                const backend::GenerationResult& result, const TextRequest& request);

// Streaming: each returns one complete server-sent event, "data: {...}\n\n".
// Which choice a chunk belongs to ("index") and the logprobs it carries: with `logprobs` on, the
// tokens given (chat: "logprobs": {"content": [...]}; completions: "logprobs": {"tokens",
// "token_logprobs", "top_logprobs" (null unless top_logprobs > 0), "text_offset"}, the offsets
// counted from `text_offset`, where the choice's text so far ends); "logprobs": null otherwise.
struct ChunkChoice {
  int index = 0;
  bool logprobs = false;
  std::span<const backend::TokenLogprob> tokens;
  int top_logprobs = 0;    // completions
  size_t text_offset = 0;  // completions
  // stream_options.include_usage: the chunk says "usage": null (every chunk before usage_chunk must).
  bool usage_null = false;
};
// Chat ("chat.completion.chunk"): role chunk first, then text chunks, then the finish chunk.
std::string chat_chunk_role(std::string_view id, std::string_view model, int64_t created, int index = 0,
                            bool usage_null = false);
std::string chat_chunk_text(std::string_view id, std::string_view model, int64_t created,
                            std::string_view text);
// One parsed change of the answer: content, reasoning_content or a tool-call fragment
// ({"tool_calls":[{"index","id","type","function":{"name","arguments"}}]}).
std::string chat_chunk_delta(std::string_view id, std::string_view model, int64_t created,
                             const backend::ChatOutputDelta& delta, const ChunkChoice& choice = {});
// The last chunk of a choice: "delta": {} (its logprobs: what no delta carried yet).
std::string chat_chunk_finish(std::string_view id, std::string_view model, int64_t created,
                              std::string_view finish_reason, const ChunkChoice& choice = {});
// Completions ("text_completion"): text chunks, then the finish chunk (text "").
std::string completion_chunk_text(std::string_view id, std::string_view model, int64_t created,
                                  std::string_view text, const ChunkChoice& choice = {});
std::string completion_chunk_finish(std::string_view id, std::string_view model, int64_t created,
                                    backend::FinishReason reason, const ChunkChoice& choice = {});
// The stream_options.include_usage chunk: "choices": [] and "usage". Every usage object has
// "prompt_tokens_details": {"cached_tokens"} (prompt tokens taken from the prompt cache).
std::string usage_chunk(std::string_view id, std::string_view model, int64_t created, Endpoint endpoint,
                        int prompt_tokens, int completion_tokens, int cached_tokens = 0);
// An error in the middle of a stream: "data: {\"error\":{...}}\n\n".
std::string sse_error(const ApiError& e);
// "data: [DONE]\n\n"
std::string_view sse_done();

// {"object":"list","data":[{"object":"embedding","index":i,"embedding":[..] | "base64"}],"model",
// "usage":{"prompt_tokens","total_tokens"}}. base64 holds the little-endian float32 bytes.
std::string embeddings_response(std::string_view model, const std::vector<std::vector<float>>& vectors,
                                bool base64, int prompt_tokens);

struct ModelEntry {
  std::string id;
  int64_t created = 0;
  std::string owned_by;
};
// {"object":"list","data":[{"id","object":"model","created","owned_by"}]}
std::string models_response(std::span<const ModelEntry> models);

// Stored chat completions. The messages of a completion as GET /v1/chat/completions/{id}/messages lists
// them: {"id": completion_id + "-" + index, "role", "content", "refusal": null, "content_parts": null,
// "tool_calls" when an assistant message made calls, "tool_call_id" for a tool message} (a JSON array).
std::string stored_messages(std::string_view completion_id,
                            const std::vector<backend::ChatMessage>& messages);
// {"object":"list","data": items,"first_id","last_id","has_more"}; items are JSON texts (completions,
// or the messages of stored_messages), first/last_id their "id"s ("" when none).
std::string stored_list(std::span<const std::string> items, bool has_more);
// {"object":"chat.completion.deleted","id","deleted":true}
std::string stored_deleted(std::string_view id);

// Standard base64 (with padding); exposed for tests and clients of the codec.
std::string base64_encode(std::string_view bytes);

}  // namespace gantry::protocol::openai
