// LlamaChatLayer: llama.cpp's own chat layer (common/chat.h of the pinned source: Jinja templates,
// each model family's tool-call format, the grammar that constrains a call, the PEG parser that reads
// it back) behind backend::ChatRequest / ChatPrompt / ChatOutputParser. Private to the llama backend.
#pragma once

#include <memory>
#include <string>

#include "gantry/backend/chat.h"
#include "gantry/core/status.h"

struct common_chat_templates;
struct llama_model;

namespace gantry::llama {

class LlamaWeights;

class LlamaChatLayer {
 public:
  // The model's own template (tokenizer.chat_template; a "tool_use" variant when it has one), or
  // `template_source` when not empty (a file's text; `source_label` says where it came from). A model
  // without any template gets ChatML, as llama-server does. Errors: InvalidArgument when the Jinja
  // does not parse (the message names `source_label`).
  static Result<std::unique_ptr<LlamaChatLayer>> create(std::shared_ptr<const LlamaWeights> weights,
                                                        const std::string& template_source,
                                                        const std::string& source_label,
                                                        backend::ReasoningFormat default_reasoning,
                                                        bool thinking = true);
  ~LlamaChatLayer();
  LlamaChatLayer(const LlamaChatLayer&) = delete;
  LlamaChatLayer& operator=(const LlamaChatLayer&) = delete;

  const backend::ChatTemplateInfo& info() const { return info_; }
  // Thread-safe. InvalidArgument names the request part that cannot be rendered.
  Result<backend::ChatPrompt> apply(const backend::ChatRequest& request) const;
  Result<std::unique_ptr<backend::ChatOutputParser>> parser(const backend::ChatPrompt& prompt) const;

 private:
  LlamaChatLayer() = default;
  std::shared_ptr<const LlamaWeights> weights_;
  common_chat_templates* templates_ = nullptr;
  backend::ChatTemplateInfo info_;
  bool native_tools_ = false;  // the template renders tool definitions and calls itself
  backend::ReasoningFormat default_reasoning_ = backend::ReasoningFormat::kAuto;
  bool thinking_ = true;  // false: enable_thinking is off whatever the request says
};

}  // namespace gantry::llama
