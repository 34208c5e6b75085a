#include "gantry/backend/llama/embedder.h"

#include <llama.h>

#include <cmath>

#include "gantry/backend/generation.h"

namespace gantry::llama {
namespace {

// The model's declared pooling ("<arch>.pooling_type": 0 none, 1 mean, 2 cls, 3 last), if any.
Pooling model_pooling(const LlamaWeights& w) {
  char buf[32];
  const std::string key = w.architecture() + ".pooling_type";
  if (llama_model_meta_val_str(w.raw(), key.c_str(), buf, sizeof buf) < 0) return Pooling::kMean;
  switch (std::atoi(buf)) {
    case 2:
      return Pooling::kCls;
    case 3:
      return Pooling::kLast;
    default:
      return Pooling::kMean;
  }
}

}  // namespace

Result<std::unique_ptr<LlamaEmbedder>> LlamaEmbedder::create(std::shared_ptr<const LlamaWeights> weights,
                                                             ContextOptions options) {
  if (!weights) return InvalidArgument("LlamaEmbedder::create: no model");
  if (options.pooling == Pooling::kNone) {
    return InvalidArgument("embeddings need a pooling (mean, cls or last) to give one vector per text");
  }
  if (options.pooling == Pooling::kModel) options.pooling = model_pooling(*weights);
  options.embeddings = true;
  options.n_ubatch = options.n_batch;
  std::unique_ptr<LlamaEmbedder> e(new LlamaEmbedder());
  e->pooling_ = options.pooling;
  GANTRY_ASSIGN_OR_RETURN(e->ctx_, LlamaContext::create(std::move(weights), options));
  return e;
}

int LlamaEmbedder::n_embd() const { return llama_model_n_embd_out(ctx_->weights().raw()); }

Result<std::vector<std::vector<float>>> LlamaEmbedder::embed(std::span<const std::string> texts,
                                                             bool normalize) {
  const auto& w = ctx_->weights();
  const int32_t n_batch = static_cast<int32_t>(ctx_->n_batch());
  const int32_t n_seq = static_cast<int32_t>(ctx_->n_seq_max());
  const int dim = n_embd();
  std::vector<std::vector<int32_t>> toks;
  for (size_t i = 0; i < texts.size(); ++i) {
    GANTRY_ASSIGN_OR_RETURN(auto t, w.tokenize(texts[i], true, false));
    if (t.empty()) return InvalidArgument("text " + std::to_string(i) + " is empty");
    if (static_cast<int32_t>(t.size()) > n_batch || t.size() > ctx_->n_ctx_seq()) {
      return backend::context_length_exceeded("text " + std::to_string(i) + " has " +
                                              std::to_string(t.size()) +
                                              " tokens; the embedding context takes at most " +
                                              std::to_string(std::min<uint32_t>(n_batch, ctx_->n_ctx_seq())));
    }
    toks.push_back(std::move(t));
  }
  std::vector<std::vector<float>> out(texts.size());
  llama_batch batch = llama_batch_init(n_batch, 0, 1);
  size_t next = 0;
  Status st;
  while (next < toks.size() && st.ok()) {
    ctx_->clear();
    batch.n_tokens = 0;
    std::vector<size_t> members;
    while (next < toks.size() && static_cast<int32_t>(members.size()) < n_seq &&
           batch.n_tokens + static_cast<int32_t>(toks[next].size()) <= n_batch) {
      const auto seq = static_cast<int32_t>(members.size());
      for (size_t p = 0; p < toks[next].size(); ++p) {
        const int32_t i = batch.n_tokens++;
        batch.token[i] = toks[next][p];
        batch.pos[i] = static_cast<llama_pos>(p);
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = seq;
        batch.logits[i] = true;
      }
      members.push_back(next++);
    }
    st = ctx_->decode(batch);
    if (!st.ok()) break;
    for (size_t k = 0; k < members.size(); ++k) {
      const float* e = llama_get_embeddings_seq(ctx_->raw(), static_cast<int32_t>(k));
      if (!e) {
        st = Internal("llama.cpp returned no pooled embedding for sequence " + std::to_string(k));
        break;
      }
      std::vector<float> v(e, e + dim);
      if (normalize) {
        double norm = 0;
        for (float x : v) norm += double(x) * x;
        norm = std::sqrt(norm);
        if (norm > 0) {
          for (float& x : v) x = static_cast<float>(x / norm);
        }
      }
      out[members[k]] = std::move(v);
    }
  }
  llama_batch_free(batch);
  ctx_->clear();
  if (!st.ok()) return st.with_context("embedding with '" + w.path() + "'");
  return out;
}

}  // namespace gantry::llama
