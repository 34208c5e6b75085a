#include "backend/llama/speculator.h"

#include <common.h>
#include <fmt/format.h>
#include <llama.h>
#include <speculative.h>

#include <algorithm>
#include <cstring>
#include <exception>

#include "gantry/core/log.h"

namespace gantry::llama {

bool SpeculativeOptions::enabled() const {
  if (draft && draft_max > 0) return true;
  return std::any_of(types.begin(), types.end(),
                     [](const std::string& t) { return t.rfind("ngram-", 0) == 0; });
}

Status check_draft_vocabulary(const LlamaWeights& target, const LlamaWeights& draft) {
  // llama.cpp's common_speculative_are_compatible (common/speculative.cpp), which is not exported: the
  // same rules, with a message that says which one failed.
  const llama_vocab* vt = target.vocab();
  const llama_vocab* vd = draft.vocab();
  const auto refuse = [&](const std::string& why) {
    return InvalidArgument(fmt::format(
        "the draft model {} cannot draft for {}: {} (a draft model must have the target's vocabulary)",
        draft.path(), target.path(), why));
  };
  if (llama_vocab_type(vt) != llama_vocab_type(vd)) {
    const auto name = [](enum llama_vocab_type t) -> std::string {
      switch (t) {
        case LLAMA_VOCAB_TYPE_SPM:
          return "SPM (LLaMA/sentencepiece)";
        case LLAMA_VOCAB_TYPE_BPE:
          return "BPE (GPT-2 style)";
        case LLAMA_VOCAB_TYPE_WPM:
          return "WPM (BERT WordPiece)";
        case LLAMA_VOCAB_TYPE_UGM:
          return "UGM (T5 Unigram)";
        default:
          return "type " + std::to_string(static_cast<int>(t));
      }
    };
    return refuse(fmt::format("its tokenizer is {}, the target's {}", name(llama_vocab_type(vd)),
                              name(llama_vocab_type(vt))));
  }
  if (llama_vocab_get_add_bos(vt) != llama_vocab_get_add_bos(vd) ||
      (llama_vocab_get_add_bos(vt) && llama_vocab_bos(vt) != llama_vocab_bos(vd))) {
    return refuse(fmt::format("its BOS token differs (adds BOS {}, id {}; the target {}, id {})",
                              llama_vocab_get_add_bos(vd), llama_vocab_bos(vd), llama_vocab_get_add_bos(vt),
                              llama_vocab_bos(vt)));
  }
  if (llama_vocab_get_add_eos(vt) != llama_vocab_get_add_eos(vd) ||
      (llama_vocab_get_add_eos(vt) && llama_vocab_eos(vt) != llama_vocab_eos(vd))) {
    return refuse(fmt::format("its EOS token differs (adds EOS {}, id {}; the target {}, id {})",
                              llama_vocab_get_add_eos(vd), llama_vocab_eos(vd), llama_vocab_get_add_eos(vt),
                              llama_vocab_eos(vt)));
  }
  const int nt = llama_vocab_n_tokens(vt);
  const int nd = llama_vocab_n_tokens(vd);
  constexpr int kMaxSizeDifference = 128;  // SPEC_VOCAB_MAX_SIZE_DIFFERENCE
  if (std::abs(nt - nd) > kMaxSizeDifference) {
    return refuse(
        fmt::format("it has {} tokens, the target {} (at most {} apart)", nd, nt, kMaxSizeDifference));
  }
  constexpr int kFirstChecked = 5;  // SPEC_VOCAB_CHECK_START_TOKEN_ID
  for (int i = kFirstChecked; i < std::min(nt, nd); ++i) {
    const char* a = llama_vocab_get_text(vt, i);
    const char* b = llama_vocab_get_text(vd, i);
    if (std::strcmp(a, b) != 0) {
      return refuse(fmt::format("token {} is '{}' in the draft but '{}' in the target", i,
                                draft.token_to_piece(i), target.token_to_piece(i)));
    }
  }
  return Status::Ok();
}

namespace {

// One row of a batch.
void add(llama_batch& b, llama_token t, llama_pos pos, llama_seq_id seq, bool logits) {
  const int32_t i = b.n_tokens++;
  b.token[i] = t;
  b.pos[i] = pos;
  b.n_seq_id[i] = 1;
  b.seq_id[i][0] = seq;
  b.logits[i] = logits;
}

bool memory_drops_tails(const llama_model* m) {
  return !llama_model_is_recurrent(m) && !llama_model_is_hybrid(m);
}

}  // namespace

Result<std::unique_ptr<Speculator>> Speculator::create(const LlamaContext& target,
                                                       const SpeculativeOptions& o) {
  if (!o.enabled())
    return InvalidArgument("speculative decoding needs a draft model or an n-gram --spec-type");
  if (o.draft_max < 0 || o.draft_min < 0 || o.draft_min > o.draft_max)
    return InvalidArgument(
        fmt::format("draft_min ({}) and draft_max ({}) must satisfy 0 <= draft_min <= draft_max", o.draft_min,
                    o.draft_max));
  if (!(o.draft_p_min >= 0 && o.draft_p_min <= 1)) return InvalidArgument("draft_p_min must be in 0..1");
  if (o.ngram_size_n < 1 || o.ngram_size_n > 1024 || o.ngram_size_m < 1 || o.ngram_size_m > 1024)
    return InvalidArgument("the n-gram sizes must be in 1..1024");
  if (!memory_drops_tails(target.weights().raw())) {
    return InvalidArgument(
        fmt::format("speculative decoding needs a KV cache that can drop rejected tokens; the memory of {} "
                    "({}) is recurrent",
                    target.weights().path(), target.weights().architecture()));
  }
  std::unique_ptr<Speculator> s(new Speculator());
  s->options_ = o;
  const auto n_seq = target.n_seq_max();

  common_params_speculative params;
  params.types.clear();
  for (const auto& name : o.types) {
    const common_speculative_type t = common_speculative_type_from_name(name);
    if (t == COMMON_SPECULATIVE_TYPE_COUNT) return InvalidArgument("unknown speculative type '" + name + "'");
    if (t == COMMON_SPECULATIVE_TYPE_NONE || t == COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE) continue;
    if (t != COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE && t != COMMON_SPECULATIVE_TYPE_NGRAM_MAP_K &&
        t != COMMON_SPECULATIVE_TYPE_NGRAM_MAP_K4V && t != COMMON_SPECULATIVE_TYPE_NGRAM_MOD &&
        t != COMMON_SPECULATIVE_TYPE_NGRAM_CACHE) {
      return InvalidArgument("speculative type '" + name +
                             "' needs a model Gantry does not load (use a draft model or an ngram-* type)");
    }
    if (std::find(params.types.begin(), params.types.end(), t) == params.types.end())
      params.types.push_back(t);
    s->needs_begin_ = s->needs_begin_ || t != COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE;
  }
  for (auto* m : {&params.ngram_simple, &params.ngram_map_k, &params.ngram_map_k4v}) {
    m->size_n = static_cast<uint16_t>(o.ngram_size_n);
    m->size_m = static_cast<uint16_t>(o.ngram_size_m);
  }
  auto& d = params.draft;
  d.n_max = o.draft_max;
  d.n_min = o.draft_min;
  d.p_min = o.draft_p_min;
  if (o.draft && o.draft_max > 0) {
    if (!memory_drops_tails(o.draft->raw())) {
      return InvalidArgument(
          fmt::format("the draft model {} ({}) has a recurrent memory; use a transformer draft",
                      o.draft->path(), o.draft->architecture()));
    }
    GANTRY_RETURN_IF_ERROR(check_draft_vocabulary(target.weights(), *o.draft));
    // The draft holds what the target holds for each slot (plus a draft), in the same layout.
    ContextOptions dc = o.draft_context;
    const ContextOptions& tc = target.options();
    dc.n_ctx = tc.n_ctx;
    dc.n_seq_max = n_seq;
    dc.n_batch = tc.n_batch;
    dc.n_ubatch = tc.n_ubatch;
    dc.kv_unified = tc.kv_unified;
    dc.embeddings = false;
    dc.pooling = Pooling::kModel;
    auto ctx = LlamaContext::create(o.draft, dc);
    if (!ctx.ok()) return ctx.status().with_context("creating the draft model's context");
    s->draft_ = std::move(*ctx);
    if (!dc.threadpool) s->draft_->share_threads(target);
    d.ctx_tgt = target.raw();
    d.ctx_dft = s->draft_->raw();
    params.types.push_back(COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE);
  }
  try {
    s->spec_ = common_speculative_init(params, n_seq);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("llama.cpp could not set up speculative decoding: ") + e.what());
  }
  if (!s->spec_) return Internal("llama.cpp set up no speculative decoding for these options");
  s->n_max_ = common_speculative_n_max(s->spec_);
  s->held_.resize(n_seq);
  s->owner_.assign(n_seq, 0);
  s->drafted_.assign(n_seq, false);
  return s;
}

Speculator::~Speculator() {
  if (spec_) common_speculative_free(spec_);
}

void Speculator::drop(int32_t slot) {
  llama_memory_seq_rm(llama_get_memory(draft_->raw()), slot, -1, -1);
  held_[static_cast<size_t>(slot)].clear();
}

bool Speculator::sync(std::span<DraftRequest> requests, std::vector<bool>& ready) {
  llama_memory_t mem = llama_get_memory(draft_->raw());
  std::vector<bool> wanted(held_.size(), false);
  size_t need = 0;
  for (auto& r : requests) {
    wanted[static_cast<size_t>(r.slot)] = true;
    auto& held = held_[static_cast<size_t>(r.slot)];
    const size_t n = std::min(held.size(), r.history.size());
    size_t keep = static_cast<size_t>(
        std::mismatch(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(n), r.history.begin()).first -
        held.begin());
    if (keep < held.size()) {
      if (keep == 0 || !llama_memory_seq_rm(mem, r.slot, static_cast<llama_pos>(keep), -1)) {
        drop(r.slot);
        keep = 0;
      }
      held.resize(keep);
    }
    need += r.history.size() - keep + 1 + static_cast<size_t>(r.n_max);
  }
  // In a unified cache the idle slots' cells share the pool: give them up when this step needs them.
  if (draft_->options().kv_unified) {
    size_t used = 0;
    for (const auto& h : held_) used += h.size();
    for (size_t slot = 0; slot < held_.size() && used + need > draft_->n_ctx(); ++slot) {
      if (wanted[slot] || held_[slot].empty()) continue;
      used -= held_[slot].size();
      drop(static_cast<int32_t>(slot));
    }
  }
  // Evaluate what the draft lacks, every sequence's in one batch of at most n_ubatch tokens a step (a
  // long prompt is caught up over several steps, as the target evaluates it: other streams never wait
  // for a whole prompt). A sequence not caught up yet gets no draft this step.
  const auto cap = static_cast<int32_t>(std::min(draft_->n_batch(), draft_->options().n_ubatch));
  llama_batch b = llama_batch_init(cap, 0, 1);
  std::vector<std::pair<int32_t, int32_t>> pending;  // (slot, token) in the batch
  bool ok = true;
  const auto flush = [&]() {
    if (b.n_tokens == 0) return;
    b.logits[b.n_tokens - 1] = true;  // llama.cpp wants an output; one costs nothing
    Status st = draft_->decode(b);
    if (st.ok()) {
      for (auto [slot, token] : pending) held_[static_cast<size_t>(slot)].push_back(token);
    } else {
      GANTRY_LOG_WARN("speculative decoding: the draft model could not catch up ({}); no drafts this step",
                      st.message());
      ok = false;
    }
    b.n_tokens = 0;
    pending.clear();
  };
  ready.assign(requests.size(), false);
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto& r = requests[i];
    const size_t have = held_[static_cast<size_t>(r.slot)].size();
    size_t k = have;
    for (; k < r.history.size() && b.n_tokens < cap; ++k) {
      add(b, r.history[k], static_cast<llama_pos>(k), r.slot, false);
      pending.emplace_back(r.slot, r.history[k]);
    }
    ready[i] = k == r.history.size();
  }
  flush();
  llama_batch_free(b);
  if (!ok) {
    for (auto& r : requests) drop(r.slot);  // a failed decode leaves the cells as before; start over
  }
  return ok;
}

void Speculator::draft(std::span<DraftRequest> requests) {
  if (requests.empty()) return;
  try {
    for (auto& r : requests) {
      r.draft.clear();
      auto& owner = owner_[static_cast<size_t>(r.slot)];
      if (owner != r.sequence) {
        owner = r.sequence;
        drafted_[static_cast<size_t>(r.slot)] = false;
        if (needs_begin_) common_speculative_begin(spec_, r.slot, r.history);
      }
    }
    std::vector<bool> ready(requests.size(), true);
    if (draft_ && !sync(requests, ready)) return;
    for (size_t i = 0; i < requests.size(); ++i) {
      if (!ready[i]) continue;
      auto& r = requests[i];
      common_speculative_get_draft_params(spec_, r.slot) = {
          /* .drafting = */ true,
          /* .n_max = */ r.n_max,
          /* .pos0 = */ static_cast<llama_pos>(r.history.size()),
          /* .id_last = */ r.last,
          /* .prompt = */ &r.history,
          /* .result = */ &r.draft,
      };
    }
    common_speculative_draft(spec_);
    for (auto& r : requests) {
      if (static_cast<int>(r.draft.size()) > r.n_max) r.draft.resize(static_cast<size_t>(r.n_max));
      drafted_[static_cast<size_t>(r.slot)] = !r.draft.empty();
      if (!draft_) continue;
      // The draft's cells now hold the history, the last token and some of the draft (the draft
      // model decodes each drafted token but the last); record exactly what they hold.
      auto& held = held_[static_cast<size_t>(r.slot)];
      const llama_pos pos_max = llama_memory_seq_pos_max(llama_get_memory(draft_->raw()), r.slot);
      const size_t full = r.history.size() + 1 + r.draft.size();
      size_t n = pos_max < 0 ? 0 : static_cast<size_t>(pos_max) + 1;
      if (n > full) {
        llama_memory_seq_rm(llama_get_memory(draft_->raw()), r.slot, static_cast<llama_pos>(full), -1);
        n = full;
      }
      held.assign(r.history.begin(),
                  r.history.begin() + static_cast<std::ptrdiff_t>(std::min(n, r.history.size())));
      if (n > r.history.size()) held.push_back(r.last);
      for (size_t i = 0; held.size() < n; ++i) held.push_back(r.draft[i]);
    }
  } catch (const std::exception& e) {
    GANTRY_LOG_WARN("speculative decoding: drafting failed ({}); no drafts this step", e.what());
    for (auto& r : requests) {
      r.draft.clear();
      drafted_[static_cast<size_t>(r.slot)] = false;
      if (draft_) drop(r.slot);
    }
  }
}

void Speculator::accepted(int32_t slot, int n_accepted) {
  auto drafted = drafted_[static_cast<size_t>(slot)];
  if (!drafted) return;
  drafted_[static_cast<size_t>(slot)] = false;
  try {
    common_speculative_accept(spec_, slot, static_cast<uint16_t>(n_accepted));
  } catch (const std::exception& e) {
    GANTRY_LOG_WARN("speculative decoding: {}", e.what());
  }
}

}  // namespace gantry::llama
