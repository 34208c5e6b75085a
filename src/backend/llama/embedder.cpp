#include "gantry/backend/llama/embedder.h"

#include <llama.h>

#include <algorithm>
#include <cmath>

#include "gantry/backend/generation.h"

namespace gantry::llama {

Pooling model_pooling(const LlamaWeights& w) {
  char buf[32];
  const std::string key = w.architecture() + ".pooling_type";
  if (llama_model_meta_val_str(w.raw(), key.c_str(), buf, sizeof buf) < 0) return Pooling::kMean;
  switch (std::atoi(buf)) {
    case 0:
      return Pooling::kNone;
    case 2:
      return Pooling::kCls;
    case 3:
      return Pooling::kLast;
    case 4:
      return Pooling::kRank;
    default:
      return Pooling::kMean;
  }
}

std::string_view pooling_name(Pooling p) {
  switch (p) {
    case Pooling::kNone:
      return "none";
    case Pooling::kMean:
      return "mean";
    case Pooling::kCls:
      return "cls";
    case Pooling::kLast:
      return "last";
    case Pooling::kRank:
      return "rank";
    case Pooling::kModel:
      break;
  }
  return "model";
}

Result<std::vector<int32_t>> rerank_tokens(const LlamaWeights& w, std::string_view query,
                                           std::string_view document) {
  if (const char* tmpl = llama_model_chat_template(w.raw(), "rerank")) {
    // Each placeholder replaced everywhere, and never inside text already substituted.
    std::string prompt;
    const std::string_view t = tmpl;
    for (size_t i = 0; i < t.size();) {
      if (t.compare(i, 7, "{query}") == 0) {
        prompt += query;
        i += 7;
      } else if (t.compare(i, 10, "{document}") == 0) {
        prompt += document;
        i += 10;
      } else {
        prompt += t[i++];
      }
    }
    return w.tokenize(prompt, /*add_special=*/false, /*parse_special=*/true);
  }
  const llama_vocab* v = w.vocab();
  GANTRY_ASSIGN_OR_RETURN(auto q, w.tokenize(query, false, false));
  GANTRY_ASSIGN_OR_RETURN(auto d, w.tokenize(document, false, false));
  llama_token eos = llama_vocab_eos(v);
  if (eos == LLAMA_TOKEN_NULL) eos = llama_vocab_sep(v);
  std::vector<int32_t> out;
  out.reserve(q.size() + d.size() + 4);
  if (llama_vocab_get_add_bos(v)) out.push_back(llama_vocab_bos(v));
  out.insert(out.end(), q.begin(), q.end());
  if (llama_vocab_get_add_eos(v)) out.push_back(eos);
  if (llama_vocab_get_add_sep(v)) out.push_back(llama_vocab_sep(v));
  out.insert(out.end(), d.begin(), d.end());
  if (llama_vocab_get_add_eos(v)) out.push_back(eos);
  return out;
}

Result<std::unique_ptr<LlamaEmbedder>> LlamaEmbedder::create(std::shared_ptr<const LlamaWeights> weights,
                                                             ContextOptions options) {
  if (!weights) return InvalidArgument("LlamaEmbedder::create: no model");
  if (options.pooling == Pooling::kModel) options.pooling = model_pooling(*weights);
  if (options.pooling == Pooling::kNone) {
    return InvalidArgument(
        "an embedding context needs a pooling (mean, cls or last; rank for a reranker's scores): none gives "
        "no vector per text");
  }
  options.embeddings = true;
  options.n_ubatch = options.n_batch;
  std::unique_ptr<LlamaEmbedder> e(new LlamaEmbedder());
  e->pooling_ = options.pooling;
  GANTRY_ASSIGN_OR_RETURN(e->ctx_, LlamaContext::create(std::move(weights), options));
  return e;
}

int LlamaEmbedder::n_embd() const { return llama_model_n_embd_out(ctx_->weights().raw()); }

Status LlamaEmbedder::check_lengths(const std::vector<std::vector<int32_t>>& seqs,
                                    const std::function<std::string(size_t)>& what) const {
  const uint32_t limit = std::min<uint32_t>(ctx_->n_batch(), ctx_->n_ctx_seq());
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (seqs[i].empty()) return InvalidArgument(what(i) + " is empty");
    if (seqs[i].size() > limit) {
      return backend::context_length_exceeded(what(i) + " has " + std::to_string(seqs[i].size()) +
                                              " tokens; the embedding context takes at most " +
                                              std::to_string(limit));
    }
  }
  return Status::Ok();
}

namespace {
Status cancelled_status(std::string_view what) {
  return Cancelled(std::string(what) + " was cancelled (the client went away or the server is stopping)");
}
}  // namespace

Status LlamaEmbedder::run(const std::vector<std::vector<int32_t>>& seqs,
                          const std::function<void(size_t, const float*)>& take,
                          const backend::CancelCheck& cancelled) {
  const int32_t n_batch = static_cast<int32_t>(ctx_->n_batch());
  const int32_t n_seq = static_cast<int32_t>(ctx_->n_seq_max());
  llama_batch batch = llama_batch_init(n_batch, 0, 1);
  size_t next = 0;
  Status st;
  while (next < seqs.size() && st.ok()) {
    if (cancelled && cancelled()) {
      st = cancelled_status("the batch of sequences");
      break;
    }
    ctx_->clear();
    batch.n_tokens = 0;
    std::vector<size_t> members;
    while (next < seqs.size() && static_cast<int32_t>(members.size()) < n_seq &&
           batch.n_tokens + static_cast<int32_t>(seqs[next].size()) <= n_batch) {
      const auto seq = static_cast<int32_t>(members.size());
      for (size_t p = 0; p < seqs[next].size(); ++p) {
        const int32_t i = batch.n_tokens++;
        batch.token[i] = seqs[next][p];
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
        st = Internal("llama.cpp returned no pooled output for sequence " + std::to_string(k));
        break;
      }
      take(members[k], e);
    }
  }
  llama_batch_free(batch);
  ctx_->clear();
  return st;
}

Result<std::vector<std::vector<float>>> LlamaEmbedder::embed(std::span<const std::string> texts,
                                                             bool normalize,
                                                             const backend::CancelCheck& cancelled) {
  const auto& w = ctx_->weights();
  if (pooling_ == Pooling::kRank) {
    return Unsupported("'" + w.path() +
                       "' is a reranking model (pooling rank): it scores query/document pairs and "
                       "gives no embeddings");
  }
  std::vector<std::vector<int32_t>> toks;
  for (size_t i = 0; i < texts.size(); ++i) {
    if (cancelled && cancelled()) return cancelled_status("embedding");
    GANTRY_ASSIGN_OR_RETURN(auto t, w.tokenize(texts[i], true, false));
    toks.push_back(std::move(t));
  }
  GANTRY_RETURN_IF_ERROR(check_lengths(toks, [](size_t i) { return "text " + std::to_string(i); }));
  const int dim = n_embd();
  std::vector<std::vector<float>> out(texts.size());
  Status st = run(
      toks,
      [&](size_t i, const float* e) {
        std::vector<float> v(e, e + dim);
        if (normalize) {
          double norm = 0;
          for (float x : v) norm += double(x) * x;
          norm = std::sqrt(norm);
          if (norm > 0) {
            for (float& x : v) x = static_cast<float>(x / norm);
          }
        }
        out[i] = std::move(v);
      },
      cancelled);
  if (!st.ok()) return st.with_context("embedding with '" + w.path() + "'");
  return out;
}

Result<LlamaEmbedder::Scores> LlamaEmbedder::rerank(std::string_view query,
                                                    std::span<const std::string> documents,
                                                    const backend::CancelCheck& cancelled) {
  const auto& w = ctx_->weights();
  if (pooling_ != Pooling::kRank) {
    return Unsupported("'" + w.path() + "' is not a reranking model: its pooling is " +
                       std::string(pooling_name(pooling_)));
  }
  std::vector<std::vector<int32_t>> toks;
  Scores out;
  for (const auto& doc : documents) {
    if (cancelled && cancelled()) return cancelled_status("reranking");
    GANTRY_ASSIGN_OR_RETURN(auto t, rerank_tokens(w, query, doc));
    out.prompt_tokens += static_cast<int>(t.size());
    toks.push_back(std::move(t));
  }
  GANTRY_RETURN_IF_ERROR(
      check_lengths(toks, [](size_t i) { return "documents[" + std::to_string(i) + "] with the query"; }));
  out.scores.assign(documents.size(), 0.0f);
  Status st = run(
      toks, [&](size_t i, const float* e) { out.scores[i] = e[0]; }, cancelled);
  if (!st.ok()) return st.with_context("reranking with '" + w.path() + "'");
  return out;
}

}  // namespace gantry::llama
