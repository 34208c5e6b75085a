// TextModel: the typed facet of a model that generates or embeds text, which the text protocols
// (OpenAI, Anthropic, Ollama) ask for instead of reading a backend's property strings.
//
//   backend::TextModel* text = model.text();     // nullptr: the model does not take text
//   text->text_info().context_length;            // tokens per sequence
//   auto prompt = text->apply_chat(request);     // the model's own chat template, tools included
//   auto parser = text->chat_parser(*prompt);    // its answer back as content/reasoning/tool calls
//
// Contract: the facet is borrowed from its Model and lives as long as it; every method is safe to call
// from many threads at once (a ChatOutputParser it returns is not: one per generation).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "gantry/backend/chat.h"
#include "gantry/core/status.h"

namespace gantry::backend {

struct TextModelInfo {
  int64_t context_length = 0;   // tokens one sequence may hold (prompt + generated)
  int sequences = 1;            // sequences generated at once
  int64_t trained_context = 0;  // the context the model was trained with (0: unknown)
  bool generates = true;        // start_generation works
  bool embeds = false;          // embed() works (every generating model can pool; see pooling)
  std::string pooling;          // the model's own pooling: "none", "mean", "cls", "last", "rank"
  ChatTemplateInfo chat;
};

class TextModel {
 public:
  virtual ~TextModel() = default;

  virtual const TextModelInfo& text_info() const = 0;

  // Renders `request` with the model's chat template (the GGUF's own Jinja template, a package's or a
  // --chat-template-file override). InvalidArgument names the offending part ("tools[1].parameters",
  // "tool_choice", "messages[3]") when the request cannot be rendered; FailedPrecondition when the
  // model has no chat template at all.
  virtual Result<ChatPrompt> apply_chat(const ChatRequest& request) const = 0;

  // A parser for the text generated from `prompt` (which must come from this model's apply_chat).
  virtual Result<std::unique_ptr<ChatOutputParser>> chat_parser(const ChatPrompt& prompt) const = 0;

  // How many tokens `text` becomes, with the special tokens a prompt gets.
  virtual Result<int> token_count(std::string_view text) const = 0;
};

}  // namespace gantry::backend
