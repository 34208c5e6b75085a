// The OpenAI Responses API's bodies (POST /v1/responses, as the `openai` client's responses.create
// and the Codex CLI send them): parses a request into chat messages, tools and generation settings,
// and writes the Response object, its server-sent events and errors. Pure functions of their
// arguments (ids are random), no I/O, no model: the route (src/server/responses_routes.cpp) renders
// the chat with the model's template and keeps responses for previous_response_id (ResponseStore).
//
// Compatibility notes:
// - "input": a string (one user message) or an array of items: messages ({"role", "content"}, with or
//   without "type":"message"; content a string or input_text / output_text / refusal parts),
//   "function_call" {call_id, name, arguments} and "function_call_output" {call_id, output} items,
//   and "reasoning" items (their text goes back to the next assistant turn). Image, file and audio
//   parts, and item types other than these, are refused with 400 naming the field
//   ("input[2].content[0].type").
// - "instructions" becomes the first (system) message; it is not carried over by
//   previous_response_id, as OpenAI has it.
// - "tools": function tools only, in the Responses shape {type:"function", name, description,
//   parameters, strict}; "tool_choice" "auto" | "none" | "required" | {type:"function", name}.
// - "text.format" {type:"text"|"json_object"|"json_schema", schema} becomes the output constraint.
// - "max_output_tokens" caps the answer: a response cut there is "incomplete" with
//   incomplete_details.reason "max_output_tokens".
// - A generation cancelled by the server (--max-generation-time) ends "completed" with what it made,
//   as chat completions' finish_reason "stop" does.
// - Unknown fields are ignored; known fields of the wrong type are refused (400 naming the field).
//   "background": true and "conversation" are refused (not kept here).
// - Streaming sends `event: <type>` + `data: {...}` pairs, each with a sequence_number starting at 0,
//   and no [DONE] (the stream ends with response.completed, response.incomplete or
//   response.failed + error).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gantry/backend/chat.h"
#include "gantry/backend/generation.h"
#include "gantry/core/json.h"
#include "gantry/protocol/openai_codec.h"

namespace gantry::protocol::responses {

using openai::ApiError;

struct ResponsesRequest {
  std::string model;
  // The conversation: the instructions (one "system" message, when given) are NOT in `chat.messages`;
  // the route puts them first, then the history of previous_response_id, then these input items.
  std::string instructions;
  // messages = the input items; tools, tool_choice, forced_tool, parallel_tool_calls, enable_thinking
  // from the request.
  backend::ChatRequest chat;
  bool stream = false;
  bool store = true;
  std::string previous_response_id;  // "" = none
  // max_output_tokens -> max_tokens (0 = unset: the server picks), temperature, top_p -> sampling,
  // text.format -> constraint.
  backend::GenerationRequest generation;
  // The request's settings the Response object echoes (instructions, tools in the Responses shape,
  // tool_choice, parallel_tool_calls, temperature, top_p, text, max_output_tokens, metadata,
  // previous_response_id, store, reasoning, truncation), as JSON object fields.
  nlohmann::json echo = nlohmann::json::object();
};

std::variant<ResponsesRequest, ApiError> parse_request(std::string_view body);

// A tool message ("function_call_output") names no function: fills each tool message's tool_name from
// the assistant call with the same id earlier in `messages` (templates that print the name need it).
void resolve_tool_names(std::vector<backend::ChatMessage>& messages);

// check_chat_request and apply_chat speak OpenAI chat's field names: maps them to this API's
// ("tools[1].function.name" -> "tools[1].name"; "messages[..]" -> "input").
std::string map_chat_field(std::string_view chat_field);

// A fresh id: prefix + "_" + 32 random hex digits, 128 bits from getrandom ("resp", "msg", "fc", "rs";
// core/random_id.h). A response id is the capability to read or delete it, together with its owner.
std::string new_id(std::string_view prefix);

// The parts of a Response that do not depend on the answer.
struct ResponseHead {
  std::string id;  // "resp_..."
  std::string model;
  int64_t created_at = 0;  // Unix seconds
  nlohmann::json echo;     // ResponsesRequest::echo
};

struct Usage {
  int input_tokens = 0;
  int output_tokens = 0;
  int reasoning_tokens = 0;  // of output_tokens
  int cached_tokens = 0;     // of input_tokens, taken from the prompt cache
};

// The Response object for an answer: output = a "reasoning" item when there is reasoning, a "message"
// item when there is text (or nothing at all), then one "function_call" item per call; status
// "completed", or "incomplete" (incomplete_details.reason "max_output_tokens") when `finish` is
// kMaxTokens.
nlohmann::json response_object(const ResponseHead& head, const backend::ChatOutput& output,
                               backend::FinishReason finish, const Usage& usage);

// The assistant turn a Response adds to the conversation (for previous_response_id).
backend::ChatMessage assistant_message(const backend::ChatOutput& output);

// {"id", "object":"response", "deleted":true}
std::string deleted_body(std::string_view id);

// A request's input items (its messages, without the instructions) as GET /v1/responses/{id}/input_items
// lists them, each with a fresh id and status "completed": a message (input_text parts; an assistant's
// output_text), a function_call per call an assistant message made, a function_call_output per tool
// message.
nlohmann::json input_items(const std::vector<backend::ChatMessage>& input);
// {"object":"list","data": items,"has_more":false,"first_id","last_id"} of input_items() kept as JSON.
std::string input_items_list(const std::string& items_json);
// POST /v1/responses/input_tokens: {"object":"response.input_tokens","input_tokens": n}
std::string input_tokens_body(int input_tokens);

// The server-sent events of one streamed response, in order. Not thread-safe: one per response.
//   begin()            response.created, response.in_progress
//   add(deltas)        output_item.added / content_part.added / output_text.delta (and
//                      reasoning_text.delta, function_call_arguments.delta), closing an item with its
//                      .done events when the next kind of output begins
//   finish(..)         the open item's .done events, then response.completed (response.incomplete when
//                      cut at max_output_tokens); response() is then the final Response object
//   fail(error)        the open item's .done events (status "incomplete"), then response.failed and an
//                      error event
// Deltas follow ChatOutputDelta's order (reasoning, content, then tool calls, each call announced with
// its index, id and name before its argument fragments).
class StreamEncoder {
 public:
  explicit StreamEncoder(ResponseHead head);
  std::string begin();
  std::string add(const std::vector<backend::ChatOutputDelta>& deltas);
  std::string finish(backend::FinishReason finish, const Usage& usage);
  std::string fail(const ApiError& error);
  // The Response as streamed so far (complete after finish()).
  const nlohmann::json& response() const { return response_; }
  // The answer as streamed (content, reasoning, tool calls), for the conversation store.
  const backend::ChatOutput& output() const { return output_; }

 private:
  enum class Open { kNone, kReasoning, kMessage, kCall };
  std::string event(nlohmann::json data);
  std::string open(Open kind, const backend::ChatOutputDelta& d);
  std::string close(std::string_view status);
  std::string switch_to(Open kind, const backend::ChatOutputDelta& d);  // close(), then open()

  ResponseHead head_;
  nlohmann::json response_;
  backend::ChatOutput output_;
  int64_t sequence_ = 0;
  Open open_ = Open::kNone;
  std::string item_id_;
  std::string text_;        // the open reasoning / message item's text
  size_t call_index_ = 0;   // the open call's ChatOutputDelta::tool_index
  backend::ToolCall call_;  // the open call
};

}  // namespace gantry::protocol::responses
