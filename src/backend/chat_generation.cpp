#include "gantry/backend/chat_generation.h"

#include "gantry/backend/text_model.h"

namespace gantry::backend {
namespace {

// A template's refusal names the part it refused first ("tools[0].function.parameters: ..."): split
// it off into the field.
ChatRefusal template_refusal(const Status& st) {
  const std::string& m = st.message();
  const size_t colon = m.find(": ");
  const bool named =
      colon != std::string::npos && colon < 80 && m.find(' ') >= colon &&
      (m.rfind("tools", 0) == 0 || m.rfind("messages", 0) == 0 || m.rfind("tool_choice", 0) == 0);
  if (!named) return {st, "messages"};
  return {Status(st.code(), m.substr(colon + 2)), m.substr(0, colon)};
}

// parallel_tool_calls false: whatever the template's grammar let through, the answer holds at most one
// tool call; the deltas of any later call are dropped (their text and reasoning pass).
class OneToolCallParser final : public ChatOutputParser {
 public:
  explicit OneToolCallParser(std::unique_ptr<ChatOutputParser> inner) : inner_(std::move(inner)) {}

  std::vector<ChatOutputDelta> add(std::string_view text, bool final) override {
    std::vector<ChatOutputDelta> out;
    for (auto& d : inner_->add(text, final)) {
      if (d.tool_index != static_cast<size_t>(-1) && d.tool_index > 0) {
        d.tool_index = static_cast<size_t>(-1);
        d.tool_call = {};
        if (d.content.empty() && d.reasoning_content.empty()) continue;
      }
      out.push_back(std::move(d));
    }
    output_ = inner_->output();
    if (output_.tool_calls.size() > 1) output_.tool_calls.resize(1);
    return out;
  }

  const ChatOutput& output() const override { return output_; }

 private:
  std::unique_ptr<ChatOutputParser> inner_;
  ChatOutput output_;
};

}  // namespace

std::unique_ptr<ChatOutputParser> at_most_one_tool_call(std::unique_ptr<ChatOutputParser> parser) {
  return std::make_unique<OneToolCallParser>(std::move(parser));
}

std::optional<ChatRefusal> check_generates(const Model& model, std::string_view served_name) {
  const TextModel* text = model.text();
  if (text && text->text_info().generates) return std::nullopt;
  const std::string name(served_name);
  return ChatRefusal{Unsupported("model '" + name + "' does not generate text (" + model.metadata().backend +
                                 "); use /v2/models/" + name + "/infer"),
                     "model"};
}

std::variant<ChatGeneration, ChatRefusal> prepare_chat(const Model& model, std::string_view served_name,
                                                       const ChatRequest& chat, GenerationRequest generation,
                                                       int parsers) {
  if (auto refused = check_generates(model, served_name)) return *refused;
  if (auto e = check_chat_request(chat)) return ChatRefusal{InvalidArgument(e->message), e->field};
  const TextModel& text = *model.text();
  auto prompt = text.apply_chat(chat);
  if (!prompt.ok()) return template_refusal(prompt.status());
  ChatGeneration out;
  for (int i = 0; i < parsers; ++i) {
    auto p = text.chat_parser(*prompt);
    if (!p.ok()) return ChatRefusal{p.status(), ""};
    if (!chat.parallel_tool_calls && !chat.tools.empty()) *p = at_most_one_tool_call(std::move(*p));
    out.parsers.push_back(std::move(*p));
  }
  GenerationRequest& g = out.request;
  g = std::move(generation);
  g.prompt = std::move(prompt->prompt);
  if (prompt->constraint.kind != OutputConstraint::Kind::kNone) g.constraint = std::move(prompt->constraint);
  g.stop.insert(g.stop.end(), prompt->stop.begin(), prompt->stop.end());
  if (parsers > 0) g.render_tokens = std::move(prompt->keep_tokens);
  g.render_special = false;
  return out;
}

}  // namespace gantry::backend
