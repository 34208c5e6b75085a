// The one way a chat becomes a generation, for every text protocol (OpenAI chat and Responses,
// Anthropic Messages, Ollama): each protocol's codec turns its request into a ChatRequest and its
// sampling into a GenerationRequest; prepare_chat() checks the chat once (check_chat_request), renders
// it with the model's own template (TextModel::apply_chat: tools, thinking), sets the prompt, the tool
// call grammar, the format's stop strings and the tokens its parser must see, and hands back the
// generation with one output parser per choice. The protocol then starts it through the model's queue
// (runtime::ModelQueue::generate) and writes the parsed answer in its own shape.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gantry/backend/chat.h"
#include "gantry/backend/generation.h"
#include "gantry/backend/model.h"
#include "gantry/core/status.h"

namespace gantry::backend {

struct ChatGeneration {
  GenerationRequest request;  // the caller's, with the chat's prompt, constraint, stops and kept tokens
  std::vector<std::shared_ptr<ChatOutputParser>> parsers;  // one per choice asked for
};

// Why a chat cannot be generated: `status` (its message without the field), and the part of the request
// at fault in ChatRequest's spelling ("messages[3].tool_call_id", "tools[1].function.parameters",
// "tool_choice", "messages" when no one part is named, "model" when the model generates no text).
struct ChatRefusal {
  Status status;
  std::string field;
};

// Unsupported (field "model") unless `model` generates text: "model 'x' does not generate text
// (<backend>); use /v2/models/x/infer".
std::optional<ChatRefusal> check_generates(const Model& model, std::string_view served_name);

// `parser` holding its answer to at most one tool call: a later call's deltas are dropped (their text
// passes) and output() lists the first call only. prepare_chat wraps every parser so when the request
// says parallel_tool_calls false, whatever the template's grammar let through.
std::unique_ptr<ChatOutputParser> at_most_one_tool_call(std::unique_ptr<ChatOutputParser> parser);

// `generation` (the request's sampling, limits, stops and response_format constraint) for `chat` on
// `model`, with `parsers` output parsers (0: the answer is not parsed back, and the chat format's special
// tokens stay out of the text). A tool grammar replaces `generation.constraint` only when tools may be
// called. `served_name` is the model's name in messages. With chat.parallel_tool_calls false and tools,
// each parser is at_most_one_tool_call's.
std::variant<ChatGeneration, ChatRefusal> prepare_chat(const Model& model, std::string_view served_name,
                                                       const ChatRequest& chat, GenerationRequest generation,
                                                       int parsers = 1);

}  // namespace gantry::backend
