// The Ollama API's bodies (/api/generate, /api/chat, /api/embed, /api/embeddings, /api/show, /api/tags,
// /api/ps, /api/version, /api/copy, /api/delete, /api/pull): parses requests into backend requests and writes
// responses, NDJSON stream lines and errors. Pure functions of their arguments: no I/O, no model (the GGUF
// helpers read an already parsed file).
//
// Compatibility notes (docs/serve-ollama.md has the user-facing version):
// - `stream` defaults to true, as Ollama's server does; a stream is NDJSON (one object per line).
// - options: temperature, top_k, top_p, min_p, repeat_penalty, presence_penalty and frequency_penalty
//   (-2..2), repeat_last_n (the window of all three penalties), seed (negative = random), num_predict (-1/-2
//   = until the context is full; 0 or absent = the server's default), stop (a string or an array of strings)
//   are applied; num_ctx is read but not applied (the context is fixed when the model loads); every other
//   option is ignored. A known option of the wrong type is a 400.
// - format: "json" (any JSON object) or a JSON schema object; "" means none.
// - /api/chat tools: [{type:"function", function:{name, description, parameters}}]; a message may carry
//   tool_calls ([{function:{name, arguments: an OBJECT}}]), a tool message tool_name. Ollama has no call
//   ids: the parser gives each call an id ("call_<message>_<k>") and each tool message the id of the
//   call it answers (the first unanswered one of that tool_name, else the next one in order), so every
//   chat template sees a consistent conversation.
// - think: a boolean (or "high"/"medium"/"low", read as true); false turns thinking off and leaves any
//   reasoning in the content; absent or true separates it into message.thinking.
// - Refused with 400 (the server cannot honour them): non-empty images, suffix, or a non-empty context
//   (the deprecated token context; this server never returns one). Ignored: template, truncate,
//   logprobs, and unknown fields.
// - keep_alive: a number of seconds or a duration string ("5m", "1h30m", "300ms", "0", and a bare
//   number of seconds "300"); negative means forever.
// - Durations in responses are nanoseconds; created_at is RFC 3339 UTC with nanoseconds.
// - JSON is written with invalid UTF-8 replaced by U+FFFD (a token may be part of a character).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gantry/backend/chat.h"
#include "gantry/backend/generation.h"
#include "gantry/core/status.h"
#include "gantry/model/gguf.h"

namespace gantry::protocol::ollama {

// An error as Ollama reports it: HTTP status plus {"error": message}.
struct ApiError {
  int http_status = 400;
  std::string message;
};

// {"error": message}
std::string error_body(std::string_view message);
// {"error": message} + "\n": an error in the middle of an NDJSON stream.
std::string stream_error_line(std::string_view message);

// A keep_alive value: a duration string ("5m", "1h30m", "1.5s", "300ms", "0", "-1m", or a bare number
// of seconds such as "300" or "-1"). Negative durations mean "forever" and come back as -1 ms.
Result<std::chrono::milliseconds> parse_duration(std::string_view text);

enum class Endpoint { kGenerate, kChat };

struct TextRequest {
  Endpoint endpoint = Endpoint::kGenerate;
  std::string model;
  // kGenerate: prompt (may be empty: load or unload only), system, raw (no chat template).
  std::string prompt;
  std::string system;
  bool raw = false;
  // kChat: the conversation (may be empty: load or unload only). content null reads as "".
  std::vector<backend::ChatMessage> messages;
  std::vector<backend::ToolDefinition> tools;  // kChat: "tools"
  std::optional<bool> think;                   // "think": nullopt when absent
  bool stream = true;
  // keep_alive: nullopt when absent; -1 ms = forever; 0 = unload once idle.
  std::optional<std::chrono::milliseconds> keep_alive;
  // options.num_predict: nullopt = the server's default; < 0 = until the context is full; else >= 1.
  std::optional<int64_t> num_predict;
  std::optional<int64_t> num_ctx;  // options.num_ctx as given (not applied; see above)
  // sampling (from options), stop (options.stop), constraint (format). The server fills in the
  // prompt, max_tokens and the callbacks.
  backend::GenerationRequest generation;
};

std::variant<TextRequest, ApiError> parse_text_request(std::string_view body, Endpoint endpoint);

// The chat a request asks the model's chat layer for: messages, tools (tool_choice auto: Ollama has no
// tool_choice), thinking on unless think is false (then reasoning stays in the content).
backend::ChatRequest chat_request(const TextRequest& request);

// True for a request that only loads (or, with keep_alive 0, unloads) the model: an empty prompt
// for /api/generate, no messages for /api/chat.
bool is_load_only(const TextRequest& request);

struct EmbedRequest {
  std::string model;
  // /api/embed: "input", a string or an array of strings (may be empty). /api/embeddings (legacy):
  // "prompt", one string.
  std::vector<std::string> input;
  std::optional<std::chrono::milliseconds> keep_alive;
  std::optional<int64_t> dimensions;  // >= 1: keep that many leading dimensions (then re-normalise)
};

std::variant<EmbedRequest, ApiError> parse_embed_request(std::string_view body, bool legacy);

struct ShowRequest {
  std::string model;  // "model" (or the older "name")
  bool verbose = false;
};

std::variant<ShowRequest, ApiError> parse_show_request(std::string_view body);

// Model names: Ollama names are "name:tag" with ":latest" implied. A served model named "x" is listed
// as "x:latest" and found as "x" or "x:latest".
std::string tagged_name(std::string_view served_name);
// The served name a request's model name may mean besides itself: "x:latest" -> "x"; otherwise "".
std::string untagged_name(std::string_view requested);

// "stop" (end of generation, a stop string, cancelled) or "length" (num_predict / the context).
std::string_view done_reason(backend::FinishReason r);

// RFC 3339 in UTC with nanoseconds: "2024-06-04T14:38:31.837530123Z".
std::string rfc3339(std::chrono::system_clock::time_point t);

// The statistics a final response carries, in nanoseconds.
struct Timing {
  int64_t total_ns = 0;        // from the request's arrival to the answer
  int64_t load_ns = 0;         // getting the model (loading it when it was not)
  int64_t prompt_eval_ns = 0;  // the prompt (from admission to the first generated token)
  int64_t eval_ns = 0;         // the generated tokens
};

// Streaming lines (each ends with "\n"): one piece of text, done false.
std::string generate_chunk(std::string_view model, std::string_view created_at, std::string_view text);
std::string chat_chunk(std::string_view model, std::string_view created_at, std::string_view text);
// A streamed chat line for one parsed delta: its content or thinking; "" when it carries neither (a
// tool call's pieces: Ollama streams a call once it is complete, with chat_tool_calls_chunk).
std::string chat_delta_chunk(std::string_view model, std::string_view created_at,
                             const backend::ChatOutputDelta& delta);
// A streamed chat line carrying complete tool calls (message.tool_calls, content "").
std::string chat_tool_calls_chunk(std::string_view model, std::string_view created_at,
                                  std::span<const backend::ToolCall> calls, size_t first_index);
// The final object (done true, done_reason, counts and durations). `text` is the whole response for a
// plain answer and "" for the last line of a stream. `line` adds the "\n" of an NDJSON line.
std::string generate_final(std::string_view model, std::string_view created_at,
                           const backend::GenerationResult& result, const Timing& timing,
                           std::string_view text, bool line);
// The final chat object. `output` is the parsed answer (content, thinking, tool_calls with their
// arguments as JSON objects) for a plain answer, nullptr for the last line of a stream (empty message).
std::string chat_final(std::string_view model, std::string_view created_at,
                       const backend::GenerationResult& result, const Timing& timing,
                       const backend::ChatOutput* output, bool line);
// A load-only request's answer: done true, done_reason `reason` ("load" or "unload"), empty text.
std::string load_response(Endpoint endpoint, std::string_view model, std::string_view created_at,
                          std::string_view reason);

// What /api/tags, /api/ps and /api/show say about a model's file.
struct ModelDetails {
  std::string format;              // "gguf"
  std::string family;              // general.architecture
  std::string parameter_size;      // "8.0B", "137M", "" when unknown
  std::string quantization_level;  // "Q4_0", "F16", "" when unknown
};

struct ModelEntry {
  std::string name;         // "tiny-llama:latest"
  std::string modified_at;  // RFC 3339
  uint64_t size = 0;        // bytes: the file (tags), the memory reserved (ps)
  std::string digest;       // 64 hex digits
  ModelDetails details;
  // /api/ps only:
  std::string expires_at;  // RFC 3339
  uint64_t size_vram = 0;
  int64_t context_length = 0;  // 0: unknown (left out)
};

// {"models":[{name, model, modified_at, size, digest, details{parent_model, format, family, families,
// parameter_size, quantization_level}}]}
std::string tags_response(std::span<const ModelEntry> models);
// {"models":[{name, model, size, digest, details, expires_at, size_vram, context_length (when known)}]}
std::string ps_response(std::span<const ModelEntry> models);

struct ShowInfo {
  std::string modelfile;
  std::string parameters;  // "num_ctx 2048\nstop ..." (Modelfile PARAMETER lines, without the keyword)
  std::string template_text;
  ModelDetails details;
  std::string model_info_json = "{}";  // a JSON object (gguf_model_info)
  std::vector<std::string> capabilities;
  std::string modified_at;
};
std::string show_response(const ShowInfo& info);

// {"model", "embeddings": [[...]], "total_duration", "load_duration", "prompt_eval_count"}
std::string embed_response(std::string_view model, const std::vector<std::vector<float>>& vectors,
                           const Timing& timing, int prompt_tokens);
// The legacy /api/embeddings answer: {"embedding": [...]}
std::string embeddings_response(const std::vector<float>& vector);
// Keeps the first `dimensions` values of each vector and scales it back to unit length.
void truncate_embeddings(std::vector<std::vector<float>>& vectors, size_t dimensions);

// {"version": version}
std::string version_response(std::string_view version);

// POST /api/copy {source, destination}: both names required.
struct CopyRequest {
  std::string source;
  std::string destination;
};
std::variant<CopyRequest, ApiError> parse_copy_request(std::string_view body);

// DELETE /api/delete {model} (or the older "name").
struct DeleteRequest {
  std::string model;
};
std::variant<DeleteRequest, ApiError> parse_delete_request(std::string_view body);

// POST /api/pull {model (or name), stream (default true), insecure (ignored)}.
struct PullRequest {
  std::string model;
  bool stream = true;
};
std::variant<PullRequest, ApiError> parse_pull_request(std::string_view body);

// An Ollama model name, "[host/][namespace/]model[:tag]", with Ollama's defaults filled in.
struct ModelPath {
  std::string host = "registry.ollama.ai";
  std::string name_space = "library";
  std::string model;
  std::string tag = "latest";
};
// InvalidArgument naming the part that is wrong (each part: letters, digits, '_', '-', '.'; a tag
// also; at most 3 '/'-separated parts).
Result<ModelPath> parse_model_path(std::string_view name);
// The name a pulled model is served under (and its file stem): "model" for library/model:latest,
// "model:tag" for another tag, "namespace-model[:tag]" outside the library namespace.
std::string served_name(const ModelPath& path);
// A name /api/copy may give a model: 1 to 128 letters, digits, '_', '-', '.', one optional ":tag".
bool valid_model_name(std::string_view name);

// The layer of a manifest holding the model: the digest ("sha256:<64 hex>") and size of the layer
// with mediaType application/vnd.ollama.image.model. Corrupt when the manifest has none or is not one.
struct ModelLayer {
  std::string digest;
  uint64_t size = 0;
};
Result<ModelLayer> model_layer(std::string_view manifest_json);

// /api/pull progress lines (NDJSON, "\n" ended unless `line` is false): {status}, and while a blob
// downloads {status:"pulling <digest 12 hex>", digest, total, completed}.
std::string pull_status(std::string_view status, bool line = true);
std::string pull_progress(std::string_view digest, uint64_t total, uint64_t completed);

// From a parsed GGUF file: format, family (general.architecture), parameter size (general.parameter_count,
// else the tensors' elements) and quantization (general.file_type, else the commonest weight type).
ModelDetails gguf_details(const model::GgufFile& file);
// Ollama's model_info: the file's metadata as a JSON object; arrays (the vocabulary) are left empty
// unless `verbose`.
std::string gguf_model_info(const model::GgufFile& file, bool verbose);
// 8030261248 -> "8.0B", 137000000 -> "137M", 1240000 -> "1.2M", 12000 -> "12K".
std::string human_count(uint64_t n);
// llama.cpp's file type (general.file_type) by number: 2 -> "Q4_0", 15 -> "Q4_K_M"; "" for unknown.
std::string_view file_type_name(uint64_t file_type);

}  // namespace gantry::protocol::ollama
