// TextModel: the typed facet of a model that generates or embeds text, which the text protocols
// (OpenAI, Anthropic, Ollama) ask for instead of reading a backend's property strings.
//
//   backend::TextModel* text = model.text();     // nullptr: the model does not take text
//   text->text_info().context_length;            // tokens per sequence
//   auto prompt = text->apply_chat(request);     // the model's own chat template, tools included
//   auto parser = text->chat_parser(*prompt);    // its answer back as content/reasoning/tool calls
//   (a protocol goes through backend::prepare_chat, gantry/backend/chat_generation.h, which does both)
//   auto ranked = text->rerank(query, documents); // a reranker's (pooling "rank") relevance scores
//
// Contract: the facet is borrowed from its Model and lives as long as it; every method is safe to call
// from many threads at once (a ChatOutputParser it returns is not: one per generation).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/backend/chat.h"
#include "gantry/core/status.h"

namespace gantry::backend {

struct TextModelInfo {
  int64_t context_length = 0;   // tokens one sequence may hold (prompt + generated)
  int sequences = 1;            // sequences generated at once
  int64_t trained_context = 0;  // the context the model was trained with (0: unknown)
  bool generates = true;        // start_generation works (false for a reranker)
  bool embeds = false;          // embed() works: pooling is mean, cls or last
  // The pooling the model's embeddings use: the one it declares ("none", "mean", "cls", "last", "rank"),
  // or "mean" for a generating model that declares none. "none": no vector per text, so no embeddings;
  // "rank": a reranker, which scores (query, document) pairs with rerank() and gives no embeddings.
  std::string pooling;
  ChatTemplateInfo chat;
};

struct RerankResult {
  std::vector<float> scores;  // one per document, in the documents' order; higher = more relevant
  int prompt_tokens = 0;      // tokens evaluated, all (query, document) pairs together
};

class TextModel {
 public:
  virtual ~TextModel() = default;

  virtual const TextModelInfo& text_info() const = 0;

  // Renders `request`, which check_chat_request() has passed (prepare_chat checks it, once), with the
  // model's chat template (the GGUF's own Jinja template, a package's or a --chat-template-file
  // override). InvalidArgument names the offending part first ("tools[1].function.parameters: ...",
  // "messages: ...") when the request cannot be rendered; FailedPrecondition when the model has no chat
  // template at all.
  virtual Result<ChatPrompt> apply_chat(const ChatRequest& request) const = 0;

  // A parser for the text generated from `prompt` (which must come from this model's apply_chat).
  virtual Result<std::unique_ptr<ChatOutputParser>> chat_parser(const ChatPrompt& prompt) const = 0;

  // How many tokens `text` becomes, with the special tokens a prompt gets.
  virtual Result<int> token_count(std::string_view text) const = 0;

  // How relevant each of `documents` is to `query`, for a reranking model (text_info().pooling "rank"):
  // each pair is formatted as llama-server formats it (the model's own rerank prompt template, else the
  // query and the document joined by the vocabulary's separator tokens) and scored by the model's
  // classifier head, one float per pair on the model's own scale (e.g. P("yes") for Qwen3 rerankers, a
  // logit for BERT ones). Deterministic: the same request gives the same scores, bit for bit; a pair
  // scored alone, twice, or among other documents agrees up to float rounding (pairs share a batch, and
  // where a sequence sits in it changes the order of the attention's sums).
  // Unsupported "... is not a reranking model: its pooling is X" for any other model;
  // InvalidArgument with backend::context_length_exceeded when a pair does not fit the context (the
  // message names "documents[i]"); Unavailable while the model drains. An empty `documents` scores nothing.
  // `cancelled` is asked between documents and decodes (Cancelled when it says so).
  virtual Result<RerankResult> rerank(std::string_view query, std::span<const std::string> documents,
                                      const CancelCheck& cancelled = {}) = 0;

  // The model's tokenizer (llama-server's /tokenize, /detokenize, /infill): the tokens of `text` (BOS
  // and the like first when `add_special`; a special token spelled in the text, "<s>", is that token
  // when `parse_special`); InvalidArgument with backend::context_length_exceeded for a text no context
  // of the model holds. Unsupported by default (a model without a tokenizer).
  virtual Result<std::vector<int32_t>> tokenize(std::string_view text, bool add_special,
                                                bool parse_special) const;
  // The bytes one token stands for (special tokens rendered); InvalidArgument for an id outside the
  // vocabulary. May be part of a UTF-8 character.
  virtual Result<std::string> token_piece(int32_t token) const;
  // The text of `tokens` (special tokens rendered); InvalidArgument names an id outside the vocabulary.
  virtual Result<std::string> detokenize(std::span<const int32_t> tokens) const;
  // The fill-in-the-middle tokens (prefix, suffix, middle), when the vocabulary has all three.
  struct FimTokens {
    int32_t prefix = -1, suffix = -1, middle = -1;
  };
  virtual std::optional<FimTokens> fim_tokens() const { return std::nullopt; }
};

}  // namespace gantry::backend
