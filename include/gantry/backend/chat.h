// Chats as every text protocol (OpenAI chat and Responses, Anthropic Messages, Ollama) hands them to a
// model, and what comes back: content, reasoning and tool calls.
//
// Plain data, defined once here. A text-generating backend renders a ChatRequest with the model's own
// chat template (ChatPrompt: the prompt text, the grammar that constrains a tool call, extra stop
// strings) and parses the generated text back into a ChatOutput (ChatOutputParser), also piece by
// piece while streaming. The protocols translate their JSON into these types and back; none of them
// knows how a model family writes a tool call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gantry/backend/generation.h"
#include "gantry/core/status.h"

namespace gantry::backend {

// One call of a tool (a function) by the model.
struct ToolCall {
  std::string id;         // the call's id ("" in a request: the server makes one)
  std::string name;       // the function's name
  std::string arguments;  // a JSON object, as text
};

// One message of a conversation.
struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string r, std::string c) : role(std::move(r)), content(std::move(c)) {}

  std::string role;                  // "system", "developer", "user", "assistant", "tool"
  std::string content;               // text; may be empty for an assistant message that only calls tools
  std::vector<ToolCall> tool_calls;  // role "assistant": the calls it made
  std::string tool_call_id;          // role "tool": the call this message answers
  std::string tool_name;             // role "tool": the function's name, where the protocol gives it
  std::string reasoning_content;     // role "assistant": its thinking, where the protocol gives it back
};

// A function the model may call.
struct ToolDefinition {
  std::string name;         // [A-Za-z0-9_.-]{1,64}
  std::string description;  // may be empty
  std::string parameters;   // the arguments' JSON schema (an object schema) as text; "" = no arguments
};

enum class ToolChoice {
  kAuto,      // the model decides between text and calls
  kNone,      // no calls: the tools are described but never called
  kRequired,  // at least one call; the output is constrained to calls
};

// OpenAI's spellings, which the OpenAI chat and Responses APIs share: "auto", "none", "required".
std::optional<ToolChoice> parse_tool_choice(std::string_view text);

// How a thinking model's reasoning comes back (llama-server's --reasoning-format).
enum class ReasoningFormat {
  kNone,  // left in the content as the model wrote it
  kAuto,  // extracted into ChatOutput::reasoning_content (llama-server's "auto"/"deepseek")
};

struct ChatRequest {
  std::vector<ChatMessage> messages;
  std::vector<ToolDefinition> tools;
  ToolChoice tool_choice = ToolChoice::kAuto;
  // A named function (OpenAI's {"type":"function","function":{"name":..}}): only this tool is offered
  // and the call is required. Must name one of `tools`.
  std::string forced_tool;
  bool parallel_tool_calls = true;  // may answer with several calls at once
  bool add_assistant_turn = true;   // end with the assistant's turn, ready for its answer
  ReasoningFormat reasoning_format = ReasoningFormat::kAuto;
  bool enable_thinking = true;  // a template that knows thinking is asked to think (or not)
};

// What a model's chat layer makes of a ChatRequest: everything a GenerationRequest needs beyond the
// sampling settings. Opaque state for parsing the answer travels in `syntax`.
struct ChatPrompt {
  std::string prompt;  // the rendered conversation (special tokens as text)
  // kGrammar when tools may be called (lazy for kAuto: it applies once the model starts a call), else
  // kNone: a response_format constraint of the request then applies as usual.
  OutputConstraint constraint;
  std::vector<std::string> stop;       // stop strings the format needs, in addition to the request's
  std::vector<int32_t> keep_tokens;    // special tokens the parser needs to see in the text
  std::string format;                  // the chat format's name ("Content-only", "peg-native", ...)
  bool parses_tool_calls = false;      // tools were offered and may be called
  std::shared_ptr<const void> syntax;  // the backend's parser state for this prompt
};

// The model's answer, parsed.
struct ChatOutput {
  std::string content;
  std::string reasoning_content;
  std::vector<ToolCall> tool_calls;
};

// What changed since the previous parse (for streaming). A tool call appears first with its index,
// id and name, then its arguments in fragments (OpenAI's deltas); content and reasoning as text.
struct ChatOutputDelta {
  std::string content;
  std::string reasoning_content;
  size_t tool_index = static_cast<size_t>(-1);  // -1: no tool-call part in this delta
  ToolCall tool_call;                           // id/name set once (first delta), arguments a fragment
};

// A request the protocols could translate but no model can honour: a tool_choice naming an
// undeclared function, a tool message answering no call, a duplicate tool name. `field` uses
// OpenAI's spelling ("tool_choice", "messages[3].tool_call_id", "tools[1].function.name").
// Bounds on a request's tools: every tool is rendered into the prompt and compiled into the call
// grammar before the context length can refuse the request (4,000 tools took 15 s of CPU, a 10 MB
// description 24 s). 128 is OpenAI's limit on tools.
inline constexpr size_t kMaxTools = 128;
inline constexpr size_t kMaxToolDescriptionBytes = 64 << 10;
inline constexpr size_t kMaxToolParametersBytes = 256 << 10;

struct ChatRequestError {
  std::string field;
  std::string message;
};
std::optional<ChatRequestError> check_chat_request(const ChatRequest& request);

// A fresh id for a tool call the model made ("call_" and 24 random letters and digits: core/random_id.h).
std::string new_tool_call_id();

// Turns successive parses of one growing answer into deltas (what ChatOutputParser::add returns). A
// tool call is announced (index, id, name) once its name is complete (its arguments have begun, a
// later call exists, or the answer is final), then its arguments follow as they grow.
class ChatDeltaTracker {
 public:
  std::vector<ChatOutputDelta> update(const ChatOutput& now, bool final);

 private:
  size_t content_sent_ = 0;
  size_t reasoning_sent_ = 0;
  std::vector<size_t> arguments_sent_;  // per announced tool call
};

// Parses one generation's text. Not thread-safe; one per generation.
class ChatOutputParser {
 public:
  virtual ~ChatOutputParser() = default;
  // Adds newly generated text; `final` on the last call (the generation ended). Returns what
  // changed since the previous call. A partial tool call is held back until its name is known, and
  // text that may still turn into a call is held back until it cannot.
  virtual std::vector<ChatOutputDelta> add(std::string_view text, bool final) = 0;
  // The message as parsed so far (complete after add(.., true)). Tool calls have ids.
  virtual const ChatOutput& output() const = 0;
};

// What a model's chat template offers, for `inspect`, Ollama's /api/show and the protocols' checks.
struct ChatTemplateInfo {
  bool present = false;  // the model carries a chat template (or one was given)
  std::string source;    // "gguf", "file", "package" or "" when none
  std::string format;    // the chat format a plain chat renders to
  bool tools = false;    // the template renders tool definitions
  bool parallel_tool_calls = false;
  bool thinking = false;  // the template knows a thinking switch
};

}  // namespace gantry::backend
