// LlamaEmbedder: one pooled embedding vector per text (llama_get_embeddings_seq), several texts per
// decode (one sequence each); for a reranker (pooling rank), one relevance score per query/document pair.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/backend/generation.h"
#include "gantry/backend/llama/context.h"
#include "gantry/backend/llama/options.h"
#include "gantry/core/status.h"

namespace gantry::llama {

// The pooling a model's GGUF declares ("<arch>.pooling_type": 0 none, 1 mean, 2 cls, 3 last, 4 rank), or
// kMean when it declares none at all (a generating model: Gantry pools its last hidden states by their
// mean, where llama-server would need --pooling mean). Never kModel.
Pooling model_pooling(const LlamaWeights& w);
// "none", "mean", "cls", "last", "rank" (llama.cpp's names); "model" for kModel.
std::string_view pooling_name(Pooling p);

// The tokens of one rerank pair, as llama-server's format_prompt_rerank builds them: the model's "rerank"
// prompt template (tokenizer.chat_template.rerank) with {query} and {document} replaced, tokenized with
// special tokens parsed and none added; else BOS (when the vocabulary adds it) query, EOS (when it adds
// EOS; SEP where it has no EOS), SEP (when it adds SEP), document, EOS (when it adds EOS), the texts
// tokenized without special tokens.
Result<std::vector<int32_t>> rerank_tokens(const LlamaWeights& w, std::string_view query,
                                           std::string_view document);

class LlamaEmbedder {
 public:
  // options.embeddings is forced on and n_ubatch raised to n_batch (a pooled sequence must fit one
  // micro-batch). Pooling kModel takes the model's own (model_pooling); kNone is refused (there would
  // be no per-sequence vector).
  static Result<std::unique_ptr<LlamaEmbedder>> create(std::shared_ptr<const LlamaWeights> weights,
                                                       ContextOptions options);

  // One vector of n_embd() floats per text, L2-normalised when `normalize`. Unsupported when the
  // pooling is kRank (a reranker's output is a score, not an embedding).
  // `cancelled` is asked before each text is tokenized and each decode: Cancelled when it says so.
  Result<std::vector<std::vector<float>>> embed(std::span<const std::string> texts, bool normalize = true,
                                                const backend::CancelCheck& cancelled = {});

  struct Scores {
    std::vector<float> scores;  // one per document, in order
    int prompt_tokens = 0;      // tokens evaluated, all pairs together
  };
  // The classifier head's first output for each (query, document) pair (rerank_tokens), for pooling
  // kRank only (else Unsupported). A pair longer than the context is InvalidArgument with
  // backend::context_length_exceeded, naming "documents[i]". The same call gives the same scores; the
  // same pair in another batch, the same up to float rounding.
  Result<Scores> rerank(std::string_view query, std::span<const std::string> documents,
                        const backend::CancelCheck& cancelled = {});

  int n_embd() const;
  Pooling pooling() const { return pooling_; }

 private:
  LlamaEmbedder() = default;
  // Decodes the sequences, as many per llama_decode as fit, and hands each one's pooled output
  // (llama_get_embeddings_seq) to `take(index, data)`.
  Status run(const std::vector<std::vector<int32_t>>& seqs,
             const std::function<void(size_t, const float*)>& take, const backend::CancelCheck& cancelled);
  // InvalidArgument (context_length_exceeded) when a sequence cannot fit one decode; `what(i)` names it.
  Status check_lengths(const std::vector<std::vector<int32_t>>& seqs,
                       const std::function<std::string(size_t)>& what) const;

  std::unique_ptr<LlamaContext> ctx_;
  Pooling pooling_ = Pooling::kMean;
};

}  // namespace gantry::llama
