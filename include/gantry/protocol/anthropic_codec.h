// The Anthropic Messages API's bodies (POST /v1/messages, /v1/messages/count_tokens): parses a request
// into a backend::ChatRequest plus generation settings, and writes the answer, the streamed events
// (server-sent events with `event:` names) and errors. Pure functions of their arguments (and one
// stateful event writer per stream): no I/O, no model.
//
// Compatibility notes:
// - Request: "model" and "max_tokens" (messages only) are required; "system" is a string or an array of
//   text blocks (joined with "\n"); "messages" (role "user" or "assistant") hold "content", a string or an
//   array of blocks: "text", "tool_use" {id, name, input (an object)} (assistant), "tool_result"
//   {tool_use_id, content (a string or text blocks), is_error} (user), "thinking"/"redacted_thinking"
//   (kept as the assistant's reasoning / ignored); a tool_result with "is_error": true reaches the model
//   as "Error: " and its content. "image", "document" and every other block type are
//   refused (400 naming the block: the models served here read text only). A user message's blocks
//   keep their order: each tool_result becomes a "tool" message, the text around it a user message.
// - "tools": [{name, description, input_schema}] (type absent or "custom"; Anthropic's server tools,
//   e.g. web_search, are refused). "tool_choice": {type: "auto"|"any"|"none"|"tool", name,
//   disable_parallel_tool_use}. "thinking": {type: "enabled"|"disabled"|"adaptive", budget_tokens}
//   switches a thinking template's thinking on or off (the budget is checked, not enforced); absent,
//   the template's default. "temperature" (0..1), "top_p", "top_k", "stop_sequences", "stream",
//   "metadata" (ignored). Unknown fields are ignored, as Anthropic's SDKs send optional ones.
// - Errors are {"type":"error","error":{"type":"invalid_request_error","message":"FIELD: ..."}}: the
//   message starts with the offending field ("messages[1].content[0].type").
// - stop_reason: "end_turn" (end of generation, or a stop string of the chat format), "max_tokens",
//   "tool_use" (the answer calls tools), "stop_sequence" (a string of "stop_sequences" ended it;
//   "stop_sequence" names it when the request gave only one, else it is null: the backend does not
//   say which matched).
// - Tool-use ids are "toolu_" and 24 letters and digits (tool_use_id() maps the chat layer's ids).
// - A thinking block's "signature" is "" (nothing signs it).
#pragma once

#include <cstddef>
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

namespace gantry::protocol::anthropic {

// An error as Anthropic reports it: HTTP status plus {"type":"error","error":{"type","message"}}.
struct ApiError {
  int http_status = 400;
  std::string type = "invalid_request_error";
  std::string message;  // starts with `field` when there is one
  std::string field;    // the offending request field ("" when none)
};

// {"type":"error","error":{"type":..,"message":..}}
std::string error_body(const ApiError& e);

// Anthropic's error type for an HTTP status: 400 invalid_request_error, 401 authentication_error,
// 403 permission_error, 404 not_found_error, 413 request_too_large, 429 rate_limit_error, 503 and 529
// overloaded_error, other 5xx api_error, other 4xx invalid_request_error.
std::string_view error_type(int http_status);

// An ApiError with `message` prefixed by `field` ("field: message") unless it already starts so.
ApiError bad_request(std::string field, std::string_view message);

// The ApiError for a failed Status (from apply_chat, start_generation, a generation that failed):
// InvalidArgument/Unsupported/Corrupt 400, NotFound 404, ResourceExhausted 429, Unavailable and
// Cancelled 503, FailedPrecondition 400 (e.g. a model without a chat template), else 500.
ApiError api_error(const Status& status, std::string field = "");

enum class Endpoint { kMessages, kCountTokens };

// Where each backend::ChatMessage came from, to name the request's own fields in errors the chat
// layer finds (backend::check_chat_request speaks of the translated messages).
struct MessageOrigin {
  std::string path;                // "system", "messages[2]", "messages[3].content[1]" (a tool_result)
  std::vector<std::string> calls;  // an assistant message: each tool_use block's path
};

struct MessagesRequest {
  Endpoint endpoint = Endpoint::kMessages;
  std::string model;
  backend::ChatRequest chat;           // system first (when given), then the conversation; tools
  std::vector<MessageOrigin> origins;  // one per chat.messages element
  std::vector<std::string> stop_sequences;
  bool stream = false;
  // max_tokens, temperature, top_p (0 -> greedy), top_k, stop (= stop_sequences). Prompt, constraint
  // and callbacks are left for the server.
  backend::GenerationRequest generation;
};

std::variant<MessagesRequest, ApiError> parse_messages_request(std::string_view body, Endpoint endpoint);

// The request's own name for a backend::ChatRequestError field ("tools[1].function.name" ->
// "tools[1].name", "messages[3].tool_call_id" -> "messages[2].content[0].tool_use_id") and for the
// leading field of an apply_chat error message ("tools[0].function.parameters: ..." ->
// "tools[0].input_schema").
std::string request_field(const MessagesRequest& request, std::string_view chat_field);

// "msg_" and 24 random letters and digits (142 bits from getrandom; core/random_id.h).
std::string new_message_id();
// The Anthropic id of a tool call the model made: "call_X" -> "toolu_X"; an id already "toolu_..." is
// kept; "" gets a fresh one; any other id is prefixed with "toolu_".
std::string tool_use_id(std::string_view call_id);

struct StopReason {
  std::string reason;                   // end_turn, max_tokens, stop_sequence, tool_use
  std::optional<std::string> sequence;  // stop_sequence: the matched string when known
};
StopReason stop_reason(backend::FinishReason finish, const backend::ChatOutput& output,
                       const std::vector<std::string>& stop_sequences);

// The non-streaming answer: {"id","type":"message","role":"assistant","model","content":[thinking?,
// text?, tool_use...],"stop_reason","stop_sequence","usage":{"input_tokens","output_tokens"}}. A
// tool_use block's input is the call's arguments parsed as an object ({} when they are not one). An
// answer with no block at all holds one empty text block.
std::string message_response(std::string_view id, std::string_view model, const backend::ChatOutput& output,
                             const StopReason& stop, int input_tokens, int output_tokens,
                             int cached_tokens = 0);

// {"input_tokens": n}
std::string count_tokens_response(int input_tokens);

// The Models API (GET /v1/models with an anthropic-version header): one ModelInfo is {"id","type":
// "model","display_name","created_at" (RFC 3339, UTC),"capabilities":null,"max_input_tokens":null,
// "max_tokens":null}; the list is {"data","has_more":false,"first_id","last_id"} (null ids when empty).
std::string model_info(std::string_view id, int64_t created_unix);
std::string models_response(std::span<const std::string> ids, int64_t created_unix);

// One SSE event: "event: NAME\ndata: JSON\n\n".
std::string sse_event(std::string_view name, std::string_view json);
// An error in the middle of a stream: "event: error" with error_body(e).
std::string sse_error(const ApiError& e);

// The events of one streamed answer, in Anthropic's order: message_start, then for each block
// content_block_start, its deltas, content_block_stop; then message_delta and message_stop. Blocks open
// and close as the parsed deltas arrive: reasoning -> a thinking block, content -> a text block, each
// tool call -> its own tool_use block (its arguments as input_json_delta fragments). Not thread-safe.
class EventWriter {
 public:
  EventWriter(std::string id, std::string model);

  // message_start (the message with empty content, usage.input_tokens = `input_tokens`) and a ping.
  std::string start(int input_tokens);
  // The events for one parsed change of the answer ("" when it carries nothing).
  std::string add(const backend::ChatOutputDelta& delta);
  // Closes the open block (or, when none was ever opened, sends an empty text block), then
  // message_delta (stop_reason, stop_sequence, usage) and message_stop.
  std::string finish(const StopReason& stop, int input_tokens, int output_tokens, int cached_tokens = 0);

 private:
  enum class Block { kNone, kThinking, kText, kToolUse };
  std::string open(Block kind, std::string_view block_json);
  std::string close();
  std::string delta(size_t index, std::string_view delta_json);

  std::string id_, model_;
  Block open_ = Block::kNone;
  size_t next_index_ = 0;            // the index the next block gets
  std::vector<size_t> tool_blocks_;  // per tool call (by its index): its block's index
};

}  // namespace gantry::protocol::anthropic
