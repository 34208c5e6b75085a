#include "backend/llama/chat_layer.h"

#include <chat.h>
#include <common.h>
#include <llama.h>
#include <log.h>

#include <cctype>
#include <exception>
#include <mutex>
#include <regex>

#include "backend/llama/generic_tools.h"
#include "gantry/backend/llama/json_grammar.h"
#include "gantry/backend/llama/weights.h"
#include "gantry/core/json.h"
#include "gantry/core/log.h"

namespace gantry::llama {

namespace {

using backend::ChatOutput;
using backend::ChatOutputDelta;

constexpr std::string_view kGenericFormat = "generic JSON (the template describes no tools)";

common_reasoning_format to_common(backend::ReasoningFormat f) {
  return f == backend::ReasoningFormat::kNone ? COMMON_REASONING_FORMAT_NONE : COMMON_REASONING_FORMAT_AUTO;
}

common_chat_msg to_common(const backend::ChatMessage& m) {
  common_chat_msg c;
  c.role = m.role == "developer" ? "system" : m.role;
  c.content = m.content;
  c.reasoning_content = m.reasoning_content;
  c.tool_call_id = m.tool_call_id;
  c.tool_name = m.tool_name;
  for (const auto& t : m.tool_calls)
    c.tool_calls.push_back({t.name, t.arguments.empty() ? "{}" : t.arguments, t.id});
  return c;
}

// What the parser needs from the rendered prompt (shared by every parser of that prompt).
struct ParserSyntax {
  common_chat_parser_params params;
  bool generic = false;  // the answer is generic_tools.h's JSON format
};

// tool_choice required: the model's first words are the call. The chat layer's grammar lets any text come
// before a call (`until-N?` in its root rule), which a weak model fills until max_tokens; that text is
// dropped from the root rule so the call starts at once.
std::string call_at_once(const std::string& grammar) {
  static const std::regex kRoot("^root ::= .*$", std::regex::multiline);
  static const std::regex kPreamble(" until-[0-9]+\\?");
  std::smatch m;
  if (!std::regex_search(grammar, m, kRoot)) return grammar;
  const std::string root = m.str();
  return grammar.substr(0, static_cast<size_t>(m.position())) + std::regex_replace(root, kPreamble, "") +
         grammar.substr(static_cast<size_t>(m.position()) + root.size());
}

class LlamaChatParser final : public backend::ChatOutputParser {
 public:
  explicit LlamaChatParser(std::shared_ptr<const ParserSyntax> syntax) : syntax_(std::move(syntax)) {}

  // Each call parses the whole answer so far (as llama-server does per token): the PEG parser has no
  // incremental mode, and answers are short next to the cost of generating them.
  std::vector<ChatOutputDelta> add(std::string_view text, bool final) override {
    text_ += text;
    if (!final && text.empty()) return {};
    common_chat_msg msg;
    try {
      msg = common_chat_parse(text_, !final, syntax_->params);
    } catch (const std::exception& e) {
      if (!final) return {};  // a partial answer that does not parse yet: wait for more
      msg = final_fallback(e.what());
    }
    if (final) drop_cut_calls(msg);
    ChatOutput now;
    now.content = std::move(msg.content);
    now.reasoning_content = std::move(msg.reasoning_content);
    for (size_t i = 0; i < msg.tool_calls.size(); ++i) {
      auto& c = msg.tool_calls[i];
      if (ids_.size() <= i) ids_.push_back(c.id.empty() ? backend::new_tool_call_id() : c.id);
      now.tool_calls.push_back({ids_[i], std::move(c.name), std::move(c.arguments)});
    }
    // A partial parse may briefly lose a call (a lenient parse backing off); keep what was announced.
    if (!final && now.tool_calls.size() < output_.tool_calls.size()) return {};
    output_ = std::move(now);
    return tracker_.update(output_, final);
  }

  const ChatOutput& output() const override { return output_; }

 private:
  // The whole answer does not parse: it was cut (max_tokens) or the model left its format. The complete
  // calls a lenient parse finds are kept (a cut-off last call, whose arguments are not yet JSON, is
  // dropped); with none, what the model wrote is the answer's text (as llama-server does).
  common_chat_msg final_fallback(const char* why) const {
    common_chat_msg msg;
    try {
      msg = common_chat_parse(text_, /*is_partial=*/true, syntax_->params);
    } catch (const std::exception&) {
      msg = common_chat_msg();
    }
    drop_cut_calls(msg);
    if (msg.tool_calls.empty()) {
      GANTRY_LOG_DEBUG("chat parser: {}; the answer is returned as text", why);
      msg = common_chat_msg();
      msg.content = text_;
    }
    return msg;
  }

  // A call cut off by max_tokens (its arguments not yet a JSON object) is not a call.
  static void drop_cut_calls(common_chat_msg& msg) {
    while (!msg.tool_calls.empty()) {
      auto args = parse_json(msg.tool_calls.back().arguments, "arguments");
      if (args.ok() && args->is_object()) break;
      msg.tool_calls.pop_back();
    }
  }

  std::shared_ptr<const ParserSyntax> syntax_;
  std::string text_;
  ChatOutput output_;
  std::vector<std::string> ids_;
  backend::ChatDeltaTracker tracker_;
};

// The grammar's triggers as llama.cpp's lazy grammar sampler takes them (common/sampling.cpp does the
// same translation for llama-server).
void add_triggers(const common_chat_params& p, backend::OutputConstraint& c) {
  for (const auto& t : p.grammar_triggers) {
    switch (t.type) {
      case COMMON_GRAMMAR_TRIGGER_TYPE_WORD:
        c.trigger_patterns.push_back(regex_escape(t.value));
        break;
      case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN:
        c.trigger_patterns.push_back(t.value);
        break;
      case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN_FULL: {
        const std::string& v = t.value;
        std::string anchored = "^$";
        if (!v.empty()) anchored = (v.front() != '^' ? "^" : "") + v + (v.back() != '$' ? "$" : "");
        c.trigger_patterns.push_back(anchored);
        break;
      }
      case COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN:
        c.trigger_tokens.push_back(t.token);
        break;
    }
  }
}

}  // namespace

Result<std::unique_ptr<LlamaChatLayer>> LlamaChatLayer::create(std::shared_ptr<const LlamaWeights> weights,
                                                               const std::string& template_source,
                                                               const std::string& source_label,
                                                               backend::ReasoningFormat default_reasoning,
                                                               bool thinking) {
  // llama.cpp's common library logs to stderr on its own; what matters reaches us as exceptions, which
  // become our errors, so its log stays silent (set once, before any of it runs).
  static std::once_flag quiet;
  std::call_once(quiet, [] { common_log_set_verbosity_thold(-1); });
  std::unique_ptr<LlamaChatLayer> layer(new LlamaChatLayer());
  layer->weights_ = std::move(weights);
  layer->default_reasoning_ = default_reasoning;
  layer->thinking_ = thinking;
  try {
    layer->templates_ = common_chat_templates_init(layer->weights_->raw(), template_source).release();
  } catch (const std::exception& e) {
    return InvalidArgument("the chat template of " + source_label + " does not parse: " + e.what());
  }
  auto& info = layer->info_;
  info.present = true;
  if (!template_source.empty()) {
    info.source = source_label;
  } else {
    info.source = common_chat_templates_was_explicit(layer->templates_) ? "gguf" : "chatml (default)";
  }
  const auto caps = common_chat_templates_get_caps(layer->templates_);
  auto cap = [&](const char* k) {
    auto it = caps.find(k);
    return it != caps.end() && it->second;
  };
  layer->native_tools_ = cap("supports_tools") || cap("supports_tool_calls");
  // Every template can call tools: natively, or in the generic JSON format (generic_tools.h).
  info.tools = true;
  info.parallel_tool_calls = cap("supports_parallel_tool_calls");
  info.thinking = common_chat_templates_support_enable_thinking(layer->templates_);
  // The format a chat with one tool renders to: what `inspect` reports as the tool-call format.
  backend::ChatRequest probe;
  probe.messages = {{"user", "hi"}};
  probe.tools = {{"probe", "", R"({"type":"object","properties":{}})"}};
  auto rendered = layer->apply(probe);
  info.format = rendered.ok() ? rendered->format : "unknown (" + rendered.status().message() + ")";
  return layer;
}

LlamaChatLayer::~LlamaChatLayer() { common_chat_templates_free(templates_); }

Result<backend::ChatPrompt> LlamaChatLayer::apply(const backend::ChatRequest& request) const {
  common_chat_templates_inputs in;
  in.messages.reserve(request.messages.size());
  for (const auto& m : request.messages) in.messages.push_back(to_common(m));
  for (size_t i = 0; i < request.tools.size(); ++i) {
    const auto& t = request.tools[i];
    if (!request.forced_tool.empty() && t.name != request.forced_tool) continue;
    std::string params = t.parameters.empty() ? R"({"type":"object","properties":{}})" : t.parameters;
    // The call's arguments are generated under a grammar from this schema: refuse what it cannot
    // express rather than let a call break the caller's schema.
    if (auto g = json_schema_grammar(params); !g.ok()) {
      return InvalidArgument("tools[" + std::to_string(i) + "].function.parameters: " + g.status().message());
    }
    in.tools.push_back({t.name, t.description, std::move(params)});
  }
  in.tool_choice = request.tool_choice == backend::ToolChoice::kNone       ? COMMON_CHAT_TOOL_CHOICE_NONE
                   : request.tool_choice == backend::ToolChoice::kRequired ? COMMON_CHAT_TOOL_CHOICE_REQUIRED
                                                                           : COMMON_CHAT_TOOL_CHOICE_AUTO;
  if (!request.forced_tool.empty()) in.tool_choice = COMMON_CHAT_TOOL_CHOICE_REQUIRED;
  in.parallel_tool_calls = request.parallel_tool_calls && info_.parallel_tool_calls;
  in.add_generation_prompt = request.add_assistant_turn;
  // The model's --reasoning-format none wins; otherwise the request says (Ollama's think:false is none).
  in.reasoning_format = to_common(
      default_reasoning_ == backend::ReasoningFormat::kNone ? default_reasoning_ : request.reasoning_format);
  in.enable_thinking = request.enable_thinking && thinking_;
  common_chat_params out;
  try {
    out = common_chat_templates_apply(templates_, in);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("messages: the model's chat template refused the conversation: ") +
                           e.what());
  }
  backend::ChatPrompt p;
  p.parses_tool_calls = !in.tools.empty() && in.tool_choice != COMMON_CHAT_TOOL_CHOICE_NONE;
  auto syntax = std::make_shared<ParserSyntax>();
  const bool cannot_force = out.grammar.empty() && in.tool_choice == COMMON_CHAT_TOOL_CHOICE_REQUIRED;
  if (p.parses_tool_calls && (!native_tools_ || cannot_force)) {
    // The template describes no tools (or gives no grammar to force a call): Gantry's generic JSON format
    // (generic_tools.h).
    common_chat_templates_inputs plain = in;
    plain.tools.clear();
    plain.tool_choice = COMMON_CHAT_TOOL_CHOICE_NONE;
    plain.messages.clear();
    for (const auto& m : generic_tool_messages(request)) plain.messages.push_back(to_common(m));
    try {
      out = common_chat_templates_apply(templates_, plain);
    } catch (const std::exception& e) {
      return InvalidArgument(std::string("messages: the model's chat template refused the conversation: ") +
                             e.what());
    }
    GANTRY_ASSIGN_OR_RETURN(std::string grammar, generic_tool_grammar(request));
    p.constraint = backend::OutputConstraint(backend::OutputConstraint::Kind::kGrammar);
    p.constraint.grammar = std::move(grammar);
    syntax->generic = true;
  }
  p.prompt = std::move(out.prompt);
  p.format = syntax->generic ? std::string(kGenericFormat) : common_chat_format_name(out.format);
  p.stop = std::move(out.additional_stops);
  if (!out.grammar.empty() && p.parses_tool_calls) {
    auto& c = p.constraint;
    c.kind = backend::OutputConstraint::Kind::kGrammar;
    c.grammar = in.tool_choice == COMMON_CHAT_TOOL_CHOICE_REQUIRED ? call_at_once(out.grammar) : out.grammar;
    c.lazy = out.grammar_lazy;
    add_triggers(out, c);
    if (!c.lazy && !out.generation_prompt.empty()) {
      // Tokens the prompt already ends with that the grammar must accept first (as common_sampler).
      auto tokens = weights_->tokenize(out.generation_prompt, /*add_special=*/false, /*parse_special=*/true);
      if (tokens.ok()) {
        for (size_t i = 0; i < tokens->size(); ++i) {
          const std::string piece = weights_->token_to_piece((*tokens)[i], true);
          if (i == 0 && !piece.empty() && std::isspace(static_cast<unsigned char>(piece[0])) &&
              !std::isspace(static_cast<unsigned char>(out.generation_prompt[0]))) {
            continue;  // a tokenizer's space before the first special token
          }
          c.prefill_tokens.push_back((*tokens)[i]);
        }
      }
    }
  }
  for (const auto& t : out.preserved_tokens) {
    auto ids = weights_->tokenize(t, /*add_special=*/false, /*parse_special=*/true);
    if (ids.ok() && ids->size() == 1) p.keep_tokens.push_back(ids->front());
  }
  syntax->params = common_chat_parser_params(out);
  syntax->params.reasoning_format = in.reasoning_format;
  syntax->params.parse_tool_calls = p.parses_tool_calls;
  if (!out.parser.empty()) {
    try {
      syntax->params.parser.load(out.parser);
    } catch (const std::exception& e) {
      return Internal(std::string("llama.cpp's chat parser did not load: ") + e.what());
    }
  }
  p.syntax = std::move(syntax);
  return p;
}

Result<std::unique_ptr<backend::ChatOutputParser>> LlamaChatLayer::parser(
    const backend::ChatPrompt& prompt) const {
  auto syntax = std::static_pointer_cast<const ParserSyntax>(prompt.syntax);
  if (!syntax) return InvalidArgument("the chat prompt was not made by this model's chat layer");
  if (syntax->generic) return make_generic_tool_parser();
  return std::unique_ptr<backend::ChatOutputParser>(new LlamaChatParser(std::move(syntax)));
}

}  // namespace gantry::llama
