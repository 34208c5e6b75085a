// LlamaEmbedder: one pooled embedding vector per text (llama_get_embeddings_seq), several texts per
// decode (one sequence each).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gantry/backend/llama/context.h"
#include "gantry/backend/llama/options.h"
#include "gantry/core/status.h"

namespace gantry::llama {

class LlamaEmbedder {
 public:
  // options.embeddings is forced on and n_ubatch raised to n_batch (a pooled sequence must fit one
  // micro-batch). Pooling kModel takes the model's own (its <arch>.pooling_type), or mean when it
  // declares none; kNone is refused (there would be no per-sequence vector).
  static Result<std::unique_ptr<LlamaEmbedder>> create(std::shared_ptr<const LlamaWeights> weights,
                                                       ContextOptions options);

  // One vector of n_embd() floats per text, L2-normalised when `normalize`.
  Result<std::vector<std::vector<float>>> embed(std::span<const std::string> texts, bool normalize = true);

  int n_embd() const;
  Pooling pooling() const { return pooling_; }

 private:
  LlamaEmbedder() = default;
  std::unique_ptr<LlamaContext> ctx_;
  Pooling pooling_ = Pooling::kMean;
};

}  // namespace gantry::llama
