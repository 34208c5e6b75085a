// Tool calls for chat templates that describe no tools (ChatML and other plain templates): llama.cpp's chat
// layer then renders no tool format and builds no grammar, so the tools and a JSON answer format go into the
// system message, and the answer is constrained to
//   {"tool_calls": [{"name": <a declared tool>, "arguments": {...its parameters...}}, ...]}
// or, when the model may answer in text (tool_choice auto), {"response": "<text>"}
// with a grammar from llama.cpp's own json_schema_to_grammar; the answer is parsed back when it is complete.
// (llama.cpp had this as its "generic" chat format; the pinned version dropped it.) Private to the backend.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gantry/backend/chat.h"
#include "gantry/core/status.h"

namespace gantry::llama {

// The conversation to render instead of `request.messages`: the tool descriptions and the answer format
// in the system message (merged into the request's first system message, if any), earlier assistant calls
// written as the JSON the model is asked for, tool results as user-visible "tool" turns.
std::vector<backend::ChatMessage> generic_tool_messages(const backend::ChatRequest& request);

// The GBNF grammar of the answer (tool_choice required or a named tool: tool_calls only; auto: either).
Result<std::string> generic_tool_grammar(const backend::ChatRequest& request);

// Parses a whole answer: tool calls (ids made here), or the response text; anything that is not the
// format is returned as content, as written.
backend::ChatOutput parse_generic_tool_answer(const std::string& text);

// A parser that holds the answer back until the generation ends (the JSON is only meaningful whole).
std::unique_ptr<backend::ChatOutputParser> make_generic_tool_parser();

}  // namespace gantry::llama
