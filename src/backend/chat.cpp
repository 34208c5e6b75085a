#include "gantry/backend/chat.h"

#include <set>

#include "gantry/core/enum_names.h"
#include "gantry/core/random_id.h"

namespace gantry::backend {

namespace {

bool valid_tool_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

// The part of `now` past the first `sent` bytes, when `now` still starts with what was sent.
std::string_view grown(const std::string& now, size_t sent) {
  return now.size() > sent ? std::string_view(now).substr(sent) : std::string_view();
}

constexpr auto kToolChoices = enum_names<ToolChoice>(
    "tool_choice",
    {{ToolChoice::kAuto, "auto"}, {ToolChoice::kNone, "none"}, {ToolChoice::kRequired, "required"}});

}  // namespace

std::optional<ToolChoice> parse_tool_choice(std::string_view text) { return kToolChoices.find(text); }

std::optional<ChatRequestError> check_chat_request(const ChatRequest& r) {
  if (r.tools.size() > kMaxTools) {
    return ChatRequestError{
        "tools", "at most " + std::to_string(kMaxTools) + " tools, got " + std::to_string(r.tools.size())};
  }
  std::set<std::string, std::less<>> names;
  for (size_t i = 0; i < r.tools.size(); ++i) {
    const std::string field = "tools[" + std::to_string(i) + "].function.name";
    const std::string& name = r.tools[i].name;
    if (r.tools[i].description.size() > kMaxToolDescriptionBytes) {
      return ChatRequestError{"tools[" + std::to_string(i) + "].function.description",
                              "a tool description may have at most " +
                                  std::to_string(kMaxToolDescriptionBytes) + " bytes, got " +
                                  std::to_string(r.tools[i].description.size())};
    }
    if (r.tools[i].parameters.size() > kMaxToolParametersBytes) {
      return ChatRequestError{"tools[" + std::to_string(i) + "].function.parameters",
                              "a tool's parameter schema may have at most " +
                                  std::to_string(kMaxToolParametersBytes) + " bytes, got " +
                                  std::to_string(r.tools[i].parameters.size())};
    }
    if (!valid_tool_name(name)) {
      return ChatRequestError{field,
                              "a function name must be 1 to 64 letters, digits, '_', '-' or '.', got '" +
                                  name.substr(0, 80) + "'"};
    }
    if (!names.insert(name).second) {
      return ChatRequestError{field, "the function '" + name + "' is declared twice"};
    }
  }
  if (!r.forced_tool.empty() && !names.count(r.forced_tool)) {
    return ChatRequestError{"tool_choice", "tool_choice names the function '" + r.forced_tool.substr(0, 80) +
                                               "', which is not one of the request's tools"};
  }
  if (r.tool_choice == ToolChoice::kRequired && r.tools.empty()) {
    return ChatRequestError{"tool_choice",
                            "tool_choice requires a tool call, but the request declares no tools"};
  }
  // Every tool result answers a call an earlier assistant message made.
  std::set<std::string, std::less<>> calls;
  for (size_t i = 0; i < r.messages.size(); ++i) {
    const ChatMessage& m = r.messages[i];
    for (size_t k = 0; k < m.tool_calls.size(); ++k) {
      if (m.tool_calls[k].name.empty()) {
        return ChatRequestError{"messages[" + std::to_string(i) + "].tool_calls[" + std::to_string(k) + "]",
                                "a tool call needs the function's name"};
      }
      if (!m.tool_calls[k].id.empty()) calls.insert(m.tool_calls[k].id);
    }
    if (m.role != "tool") continue;
    if (m.tool_call_id.empty()) {
      if (calls.empty()) {
        return ChatRequestError{"messages[" + std::to_string(i) + "]",
                                "a tool message must follow an assistant message with tool_calls"};
      }
      continue;  // protocols without call ids (Ollama) answer the calls in order
    }
    if (!calls.count(m.tool_call_id)) {
      return ChatRequestError{
          "messages[" + std::to_string(i) + "].tool_call_id",
          "no earlier assistant message made a tool call with id '" + m.tool_call_id.substr(0, 80) + "'"};
    }
  }
  return std::nullopt;
}

std::string new_tool_call_id() { return random_base62_id("call_"); }

std::vector<ChatOutputDelta> ChatDeltaTracker::update(const ChatOutput& now, bool final) {
  std::vector<ChatOutputDelta> out;
  if (auto r = grown(now.reasoning_content, reasoning_sent_); !r.empty()) {
    out.emplace_back().reasoning_content = std::string(r);
    reasoning_sent_ = now.reasoning_content.size();
  }
  if (auto c = grown(now.content, content_sent_); !c.empty()) {
    out.emplace_back().content = std::string(c);
    content_sent_ = now.content.size();
  }
  for (size_t i = 0; i < now.tool_calls.size(); ++i) {
    const ToolCall& call = now.tool_calls[i];
    if (i == arguments_sent_.size()) {
      // Announce a call once its name can no longer grow.
      const bool name_complete = !call.arguments.empty() || i + 1 < now.tool_calls.size() || final;
      if (!name_complete || call.name.empty()) break;
      ChatOutputDelta& d = out.emplace_back();
      d.tool_index = i;
      d.tool_call.id = call.id;
      d.tool_call.name = call.name;
      arguments_sent_.push_back(0);
    }
    if (auto a = grown(call.arguments, arguments_sent_[i]); !a.empty()) {
      ChatOutputDelta& d = out.emplace_back();
      d.tool_index = i;
      d.tool_call.arguments = std::string(a);
      arguments_sent_[i] = call.arguments.size();
    }
  }
  return out;
}

}  // namespace gantry::backend
