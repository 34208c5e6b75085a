#include "gantry/backend/llama/batch_engine.h"

#include <llama.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>

#include "backend/llama/host_prompt_cache.h"
#include "backend/llama/log_bridge.h"
#include "backend/llama/sampling.h"
#include "backend/llama/speculator.h"
#include "backend/llama/text_stream.h"
#include "gantry/backend/llama/json_grammar.h"
#include "gantry/core/log.h"

namespace gantry::llama {

using backend::FinishReason;
using backend::GenerationRequest;
using backend::GenerationResult;

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// `token`'s log-probability and the `n_top` most likely tokens', by log-softmax over all `n_vocab`
// raw logits (the model's own distribution: before penalties, grammar and temperature).
backend::TokenLogprob token_logprob(const LlamaWeights& w, const float* logits, int32_t n_vocab,
                                    int32_t token, int n_top, bool render_special) {
  float max_logit = logits[0];
  for (int32_t t = 1; t < n_vocab; ++t) max_logit = std::max(max_logit, logits[t]);
  double sum = 0;
  for (int32_t t = 0; t < n_vocab; ++t) sum += std::exp(static_cast<double>(logits[t] - max_logit));
  const double log_z = static_cast<double>(max_logit) + std::log(sum);
  const auto logprob = [&](int32_t t) { return static_cast<float>(logits[t] - log_z); };

  backend::TokenLogprob out;
  out.token = token;
  out.text = w.token_to_piece(token, render_special);
  out.logprob = logprob(token);
  if (n_top > 0) {
    std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
    for (int32_t t = 0; t < n_vocab; ++t) ids[static_cast<size_t>(t)] = t;
    const auto k = static_cast<std::ptrdiff_t>(std::min(n_top, n_vocab));
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                      [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    for (std::ptrdiff_t i = 0; i < k; ++i) {
      out.top.emplace_back(w.token_to_piece(ids[static_cast<size_t>(i)], render_special),
                           logprob(ids[static_cast<size_t>(i)]));
    }
  }
  return out;
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const auto n = static_cast<std::ptrdiff_t>(std::min(a.size(), b.size()));
  return static_cast<size_t>(std::mismatch(a.begin(), a.begin() + n, b.begin()).first - a.begin());
}

}  // namespace

struct BatchEngine::BatchBuf {
  llama_batch batch;
  explicit BatchBuf(int32_t n) : batch(llama_batch_init(n, 0, 1)) {}
  ~BatchBuf() { llama_batch_free(batch); }
  void clear() { batch.n_tokens = 0; }
  void add(llama_token t, llama_pos pos, llama_seq_id seq, bool logits) {
    const int32_t i = batch.n_tokens++;
    batch.token[i] = t;
    batch.pos[i] = pos;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = seq;
    batch.logits[i] = logits;
  }
};

// One request: its choices' sequences share the prompt, the request and one result.
struct BatchEngine::Group {
  GenerationRequest req;  // max_tokens capped at the context
  std::vector<int32_t> prompt;
  std::shared_ptr<std::atomic<bool>> cancel;  // the handle's; set also when a choice fails
  std::vector<GenerationResult> results;      // one per choice, filled as they end
  int remaining = 0;                          // choices not yet ended
  int live = 0;                               // choices admitted and not yet retired
  size_t prompt_reserve = 0;  // KV cells the shared prompt holds until the last choice retires
  size_t n_cached = 0;        // prompt tokens the leader's slot already held (not evaluated)
  Status error;               // the first choice's failure
  std::promise<Result<GenerationResult>> promise;
  backend::FairQueue::Key key;  // its place in pending_ (fair_)
};

struct BatchEngine::Seq {
  std::shared_ptr<Group> group;
  int choice = 0;
  uint64_t id = 0;
  uint64_t admitted_order = 0;
  uint64_t epoch = 0;  // the engine's cache_epoch_ at admission
  int32_t slot = -1;
  size_t prompt_done = 0;  // prompt tokens already in this sequence's cache
  int32_t pos = 0;         // position of the next token to decode
  bool generating = false;
  bool awaits_prompt = false;   // a choice other than the first: its prompt comes from the leader
  std::vector<Seq*> followers;  // the leader's choices waiting for its prompt (same group)
  int32_t next_token = -1;      // the sampled token the next step decodes
  std::vector<int32_t> draft;   // drafted tokens the next step decodes after it (speculative)
  size_t reserve = 0;           // KV cells for its generated tokens (the prompt's are the group's)
  llama_sampler* sampler = nullptr;
  TextStream stream;
  GenerationResult result;
  size_t logprobs_sent = 0;  // result.logprobs already given to on_piece
  int32_t out_index = -1;    // this step's output row, -1 when none
  bool in_batch = false;
  bool done = false;
  Clock::time_point t_admit, t_first;

  const GenerationRequest& req() const { return group->req; }
  bool cancelled() const { return group->cancel->load(std::memory_order_relaxed); }

  ~Seq() {
    if (sampler) llama_sampler_free(sampler);
  }
};

Result<std::unique_ptr<BatchEngine>> BatchEngine::create(std::shared_ptr<const LlamaWeights> weights,
                                                         const ContextOptions& options,
                                                         const EngineOptions& engine,
                                                         const SpeculativeOptions& speculative) {
  if (options.embeddings)
    return InvalidArgument("BatchEngine generates text; use LlamaEmbedder for embeddings");
  if (options.n_batch < options.n_seq_max) {
    return InvalidArgument("n_batch (" + std::to_string(options.n_batch) +
                           ") must be >= parallel sequences (" + std::to_string(options.n_seq_max) +
                           ") so every generating sequence fits one step");
  }
  std::unique_ptr<BatchEngine> e(new BatchEngine());
  GANTRY_ASSIGN_OR_RETURN(e->ctx_, LlamaContext::create(std::move(weights), options));
  const auto n_seq = static_cast<int32_t>(e->ctx_->n_seq_max());
  for (int32_t s = 0; s < n_seq; ++s) e->free_slots_.push_back(s);
  e->slot_tokens_.resize(static_cast<size_t>(n_seq));
  e->slot_used_.assign(static_cast<size_t>(n_seq), 0);
  e->batch_ = std::make_unique<BatchBuf>(static_cast<int32_t>(e->ctx_->n_batch()));
  e->eopts_ = engine;
  if (e->eopts_.prefill_chunk == 0) e->eopts_.prefill_chunk = e->ctx_->options().n_ubatch;
  if (engine.cache_prompt && engine.cache_ram_bytes > 0) {
    e->host_cache_ =
        std::make_unique<HostPromptCache>(engine.cache_ram_bytes, engine.budget, engine.budget_owner);
  }
  if (speculative.enabled()) {
    GANTRY_ASSIGN_OR_RETURN(e->spec_, Speculator::create(*e->ctx_, speculative));
  }
  return e;
}

BatchEngine::~BatchEngine() {
  stop();
  cancel_all();
  std::lock_guard drive(drive_mu_);
  for (auto& s : active_) {
    if (!s->done) finish(*s, FinishReason::kCancelled);
  }
  std::deque<std::vector<std::unique_ptr<Seq>>> pending;
  {
    std::lock_guard lock(mu_);
    pending.swap(pending_);
  }
  // Outside the lock: settling runs the request's on_done and drops its callbacks (lock order).
  for (auto& entry : pending) {
    for (auto& s : entry) {
      s->result.finish = FinishReason::kCancelled;
      settle(*s);
    }
  }
}

Result<std::vector<int32_t>> BatchEngine::tokenize_prompt(const GenerationRequest& r) const {
  if (!r.tokens.empty()) {
    for (int32_t t : r.tokens) {
      if (!ctx_->weights().token_valid(t)) {
        return InvalidArgument("prompt token " + std::to_string(t) + " is outside the vocabulary (0.." +
                               std::to_string(ctx_->weights().n_vocab() - 1) + ")");
      }
    }
    return r.tokens;
  }
  return ctx_->weights().tokenize(r.prompt, r.add_special, r.parse_special);
}

namespace {

// A grammar sampler for `c` (kNone: null), its prefill tokens accepted.
Result<llama_sampler*> make_grammar(const backend::OutputConstraint& c, const std::string& gbnf,
                                    const llama_vocab* vocab) {
  llama_sampler* grammar = nullptr;
  // llama.cpp logs a grammar it cannot parse whole, as errors: kept out of the log (a client's schema
  // could fill it), and its reason goes into the request's error instead.
  LogCapture capture(/*quiet=*/true);
  if (c.kind == backend::OutputConstraint::Kind::kGrammar && c.lazy) {
    std::vector<const char*> patterns;
    for (const auto& p : c.trigger_patterns) patterns.push_back(p.c_str());
    grammar = llama_sampler_init_grammar_lazy_patterns(vocab, gbnf.c_str(), "root", patterns.data(),
                                                       patterns.size(), c.trigger_tokens.data(),
                                                       c.trigger_tokens.size());
  } else {
    grammar = llama_sampler_init_grammar(vocab, gbnf.c_str(), "root");
  }
  if (!grammar) {
    std::string why = capture.problems();
    constexpr size_t kShown = 300;
    if (why.size() > kShown) why = why.substr(0, kShown) + "...";
    return InvalidArgument("llama.cpp rejected the grammar built for the output constraint" +
                           (why.empty() ? std::string() : ": " + why));
  }
  if (!c.lazy) {
    // Tokens the prompt ends with that the grammar's root begins with (a chat format's opening
    // tag). llama.cpp's grammar sampler reports a token it cannot accept by throwing.
    try {
      for (int32_t t : c.prefill_tokens) llama_sampler_accept(grammar, t);
    } catch (const std::exception& e) {
      llama_sampler_free(grammar);
      return InvalidArgument(std::string("the grammar does not accept the prompt's last tokens: ") +
                             e.what());
    }
  }
  return grammar;
}

}  // namespace

Result<SequenceHandle> BatchEngine::submit(GenerationRequest request) {
  GANTRY_RETURN_IF_ERROR(backend::validate(request.sampling));
  if (request.max_tokens < 1) {
    return InvalidArgument("max_tokens must be >= 1, got " + std::to_string(request.max_tokens));
  }
  if (request.n_top_logits < 0 || request.n_top_logits > 64) {
    return InvalidArgument("n_top_logits must be in 0..64");
  }
  if (request.n_logprobs < -1 || request.n_logprobs > 20) {
    return InvalidArgument("n_logprobs must be in -1..20 (-1 = off), got " +
                           std::to_string(request.n_logprobs));
  }
  const auto n_seq = static_cast<int>(ctx_->n_seq_max());
  if (request.n_choices < 1 || request.n_choices > n_seq) {
    return InvalidArgument("n_choices must be in 1.." + std::to_string(n_seq) +
                           " (the model's parallel sequences), got " + std::to_string(request.n_choices));
  }
  if (request.stop.size() > backend::kMaxStopSequences) {
    return InvalidArgument("at most " + std::to_string(backend::kMaxStopSequences) + " stop sequences, got " +
                           std::to_string(request.stop.size()));
  }
  for (const auto& stop : request.stop) {
    if (stop.size() > backend::kMaxStopBytes) {
      return InvalidArgument("a stop sequence may have at most " + std::to_string(backend::kMaxStopBytes) +
                             " bytes, got one of " + std::to_string(stop.size()));
    }
  }
  if (request.on_text && request.on_piece) {
    return InvalidArgument("a generation request takes on_text or on_piece, not both");
  }
  if (request.on_text && request.n_choices > 1) {
    return InvalidArgument("n_choices > 1 needs on_piece (on_text cannot tell the choices apart)");
  }
  const int32_t n_vocab = ctx_->weights().n_vocab();
  for (const auto& [token, bias] : request.sampling.logit_bias) {
    if (token >= n_vocab) {
      return InvalidArgument("logit_bias: token id " + std::to_string(token) +
                             " is outside the vocabulary (0.." + std::to_string(n_vocab - 1) + ")");
    }
  }
  if (request.ignore_eos && request.constraint.kind != backend::OutputConstraint::Kind::kNone) {
    return InvalidArgument(
        "ignore_eos cannot be combined with an output constraint (response_format or a tool grammar): "
        "a constrained output must be able to end");
  }
  // ignore_eos bans every end-of-generation token, as llama-server does (a -inf logit bias).
  std::vector<std::pair<int32_t, float>> eog_bans;
  if (request.ignore_eos) {
    for (int32_t t = 0; t < n_vocab; ++t) {
      if (ctx_->weights().is_eog(t)) eog_bans.emplace_back(t, -std::numeric_limits<float>::infinity());
    }
  }
  const size_t cap = ctx_->n_ctx_seq();
  // Refused before the tokenizer spends seconds on megabytes that cannot fit anyway.
  if (request.tokens.empty())
    GANTRY_RETURN_IF_ERROR(check_text_fits(ctx_->weights(), request.prompt.size(), cap));
  auto g = std::make_shared<Group>();
  GANTRY_ASSIGN_OR_RETURN(g->prompt, tokenize_prompt(request));
  if (g->prompt.empty()) return InvalidArgument("the prompt is empty (no tokens to start from)");
  if (g->prompt.size() + 1 > cap) {
    return backend::context_length_exceeded(
        "the prompt has " + std::to_string(g->prompt.size()) + " tokens but the context holds " +
        std::to_string(cap) +
        " per sequence (including one for the reply); use a larger --ctx or a shorter prompt");
  }
  // Room for each choice's tokens. In a unified cache the choices share the prompt's cells and draw
  // their own from one pool, so n choices split what the prompt leaves.
  const int n = request.n_choices;
  size_t room = cap - g->prompt.size();
  if (ctx_->options().kv_unified && n > 1) {
    const size_t n_ctx = ctx_->n_ctx();
    room = std::min(room, n_ctx > g->prompt.size() ? (n_ctx - g->prompt.size()) / static_cast<size_t>(n) : 0);
    if (room < 1) {
      return backend::context_length_exceeded(
          "the prompt has " + std::to_string(g->prompt.size()) + " tokens and " + std::to_string(n) +
          " choices need at least one more each, but the context holds " + std::to_string(n_ctx) +
          "; use a larger --ctx, fewer choices or a shorter prompt");
    }
  }
  // A sequence stops at its share of the context (finish reason max_tokens), never runs out of KV cells:
  // `-n 2147483647 --ctx 64` generates until the context is full.
  request.max_tokens = static_cast<int>(std::min<size_t>(static_cast<size_t>(request.max_tokens), room));
  g->prompt_reserve = g->prompt.size();
  std::string gbnf;
  if (request.constraint.kind != backend::OutputConstraint::Kind::kNone) {
    GANTRY_ASSIGN_OR_RETURN(gbnf, grammar_for(request.constraint));
  }
  std::vector<std::unique_ptr<Seq>> seqs;
  for (int i = 0; i < n; ++i) {
    auto s = std::make_unique<Seq>();
    s->group = g;
    s->choice = i;
    s->awaits_prompt = i > 0;
    s->reserve = static_cast<size_t>(request.max_tokens);
    llama_sampler* grammar = nullptr;
    if (!gbnf.empty()) {
      GANTRY_ASSIGN_OR_RETURN(grammar, make_grammar(request.constraint, gbnf, ctx_->weights().vocab()));
    }
    backend::SamplingParams sp = request.sampling;
    if (sp.seed != 0xFFFFFFFFu) sp.seed += static_cast<uint32_t>(i);  // mod 2^32
    sp.logit_bias.insert(sp.logit_bias.end(), eog_bans.begin(), eog_bans.end());
    // The chain owns `grammar` from here; the penalties see the prompt.
    s->sampler = make_sampler_chain(sp, n_vocab, static_cast<int32_t>(cap), g->prompt, grammar);
    s->stream = TextStream(request.stop);
    s->result.n_prompt_tokens = static_cast<int>(g->prompt.size());
    seqs.push_back(std::move(s));
  }
  for (int i = 1; i < n; ++i) seqs[0]->followers.push_back(seqs[static_cast<size_t>(i)].get());
  g->cancel = std::make_shared<std::atomic<bool>>(false);
  g->results.resize(static_cast<size_t>(n));
  g->remaining = n;
  g->req = std::move(request);

  SequenceHandle h;
  h.cancel_ = g->cancel;
  h.result_ = g->promise.get_future().share();
  {
    std::lock_guard lock(mu_);
    for (auto& s : seqs) s->id = next_id_;
    h.id_ = next_id_++;
    // Priority classes first, weighted fair shares among tenants, none passed more than
    // FairQueue::kMaxOvertakes times (all one flow: first come first served, as before).
    Group& group = *seqs.front()->group;
    group.key = fair_.key_for(group.req.schedule);
    const size_t at = fair_.place(group.key, pending_.size(), [this](size_t i) -> backend::FairQueue::Key& {
      return pending_[i].front()->group->key;
    });
    pending_.insert(pending_.begin() + static_cast<std::ptrdiff_t>(at), std::move(seqs));
    stats_.pending = pending_.size();
  }
  cv_.notify_all();
  return h;
}

void BatchEngine::park_slot_locked(int32_t slot) {
  const auto& tokens = slot_tokens_[static_cast<size_t>(slot)];
  if (host_cache_ && !tokens.empty()) host_cache_->save(ctx_->raw(), slot, tokens);
}

void BatchEngine::restore_slot_locked(int32_t slot, uint64_t id) {
  auto entry = host_cache_->take(id);
  drop_slot_cache_locked(slot);  // saved first when it holds anything
  auto& tokens = slot_tokens_[static_cast<size_t>(slot)];
  if (!entry.ok()) return;
  auto restored = host_cache_->restore(ctx_->raw(), slot, std::move(*entry));
  if (!restored.ok()) {
    GANTRY_LOG_DEBUG("prompt cache: {}; evaluating the prompt instead", restored.status().message());
    return;
  }
  tokens = std::move(*restored);
}

void BatchEngine::drop_slot_cache_locked(int32_t slot, bool park) {
  auto& tokens = slot_tokens_[static_cast<size_t>(slot)];
  if (park) park_slot_locked(slot);
  if (!tokens.empty()) ctx_->remove_sequence(slot);
  tokens.clear();
  slot_used_[static_cast<size_t>(slot)] = 0;  // empty: the first choice for a prompt nothing matches
}

size_t BatchEngine::idle_cached_cells_locked() const {
  size_t n = 0;
  for (int32_t slot : free_slots_) n += slot_tokens_[static_cast<size_t>(slot)].size();
  return n;
}

bool BatchEngine::evict_idle_locked(size_t need, size_t n_ctx, int32_t spare) {
  // Cells shared between slots (choices' prompts) are counted once per slot: an over-estimate, so
  // this may evict more than strictly needed but never too little.
  for (;;) {
    size_t used = reserved_ + idle_cached_cells_locked();
    if (spare >= 0) used -= slot_tokens_[static_cast<size_t>(spare)].size();  // counted in `need`
    if (used + need <= n_ctx) return true;
    int32_t victim = -1;
    for (int32_t slot : free_slots_) {
      const auto i = static_cast<size_t>(slot);
      if (slot_tokens_[i].empty() || slot == spare) continue;
      if (victim < 0 || slot_used_[i] < slot_used_[static_cast<size_t>(victim)]) victim = slot;
    }
    if (victim < 0) return false;
    drop_slot_cache_locked(victim);
    ++stats_.cache_evictions;
  }
}

std::pair<int32_t, size_t> BatchEngine::best_slot_locked(const std::vector<int32_t>& prompt,
                                                         bool reuse) const {
  size_t best = 0;
  size_t best_similar = 0;
  size_t best_shared = 0;
  for (size_t k = 0; k < free_slots_.size(); ++k) {
    const auto i = static_cast<size_t>(free_slots_[k]);
    const size_t shared = reuse ? common_prefix(slot_tokens_[i], prompt) : 0;
    // A match under a tenth of the prompt (a BOS token, a common opening) does not make a slot that
    // holds another conversation the choice (llama-server's --slot-prompt-similarity 0.1): the least
    // recently used slot is taken instead.
    const size_t similar = shared * 10 < prompt.size() ? 0 : shared;
    const auto bi = static_cast<size_t>(free_slots_[best]);
    if (k == 0 || similar > best_similar || (similar == best_similar && slot_used_[i] < slot_used_[bi])) {
      best = k;
      best_similar = similar;
      best_shared = shared;
    }
  }
  // Whichever slot is taken, what it shares with the prompt is kept (as llama-server keeps the common
  // prefix of the slot it chose): the chat template's opening is not evaluated again.
  return {free_slots_[best], best_shared};
}

size_t BatchEngine::take_slot_locked(int32_t slot, size_t prefix, size_t prompt_size) {
  free_slots_.erase(std::find(free_slots_.begin(), free_slots_.end(), slot));
  auto& cached = slot_tokens_[static_cast<size_t>(slot)];
  // At least the prompt's last token is evaluated: its logits give the first sampled token.
  size_t keep = std::min(prefix, prompt_size - 1);
  llama_memory_t mem = llama_get_memory(ctx_->raw());
  // A sliding-window cache has dropped positions before its window: continuing at `keep` needs the
  // window before it (llama-server's check; without checkpoints the prompt is evaluated again).
  const int32_t n_swa = llama_model_n_swa(ctx_->weights().raw());
  const llama_pos pos_min = llama_memory_seq_pos_min(mem, slot);
  if (keep > 0 && pos_min > 0 &&
      (n_swa <= 0 || pos_min > std::max<llama_pos>(0, static_cast<llama_pos>(keep) - n_swa))) {
    keep = 0;
  }
  if (keep < cached.size()) {
    if (keep == 0 || !llama_memory_seq_rm(mem, slot, static_cast<llama_pos>(keep), -1)) {
      ctx_->remove_sequence(slot);  // a memory that cannot drop a tail (recurrent) starts over
      keep = 0;
    }
  }
  cached.clear();
  return keep;
}

int32_t BatchEngine::lru_slot_locked() const {
  size_t best = 0;
  for (size_t k = 1; k < free_slots_.size(); ++k) {
    if (slot_used_[static_cast<size_t>(free_slots_[k])] < slot_used_[static_cast<size_t>(free_slots_[best])])
      best = k;
  }
  return free_slots_[best];
}

int32_t BatchEngine::take_lru_slot_locked() {
  const int32_t slot = lru_slot_locked();
  free_slots_.erase(std::find(free_slots_.begin(), free_slots_.end(), slot));
  drop_slot_cache_locked(slot);
  return slot;
}

void BatchEngine::admit_locked(std::vector<std::vector<std::unique_ptr<Seq>>>& cancelled) {
  const size_t n_ctx = ctx_->n_ctx();
  const bool unified = ctx_->options().kv_unified;
  while (!pending_.empty()) {
    auto& next = pending_.front();
    if (next.front()->cancelled()) {
      cancelled.push_back(std::move(pending_.front()));  // settled by the caller, outside the lock
      pending_.pop_front();
      ++stats_.completed;
      continue;
    }
    if (free_slots_.size() < next.size()) break;
    Group& g = *next.front()->group;
    size_t reserve = g.prompt_reserve;
    for (const auto& s : next) reserve += s->reserve;
    const bool reuse = eopts_.cache_prompt && g.req.cache_prompt;
    auto [leader_slot, prefix] = best_slot_locked(g.prompt, reuse);
    // A state parked in host memory that shares more than any slot goes into the least recently
    // used slot (a match under a tenth of the prompt counts as none, as for slots).
    HostPromptCache::Match parked;
    if (reuse && host_cache_) {
      parked = host_cache_->best(g.prompt);
      if (parked.prefix > prefix && parked.prefix * 10 >= g.prompt.size()) {
        leader_slot = lru_slot_locked();
        prefix = parked.prefix;
      } else {
        parked = {};
      }
    }
    if (unified) {
      // Idle slots' cached cells share the pool: give them up (LRU) rather than wait or overflow.
      // The slot this request reuses is spared; its kept prefix is part of `reserve` (a restored
      // state holds its whole length until the tail that does not match is dropped).
      if (!active_.empty() && reserved_ + reserve > n_ctx) break;  // wait for KV room
      const size_t restore_extra = parked.size > g.prompt.size() ? parked.size - g.prompt.size() : 0;
      evict_idle_locked(reserve + restore_extra, n_ctx, leader_slot);
    }
    auto entry = std::move(pending_.front());
    pending_.pop_front();
    fair_.started(g.key);
    g.live = static_cast<int>(entry.size());
    reserved_ += g.prompt_reserve;
    const auto now = Clock::now();
    for (auto& s : entry) {
      if (s->choice == 0) {
        const auto i = static_cast<size_t>(leader_slot);
        if (parked.id != 0) {
          restore_slot_locked(leader_slot, parked.id);
          prefix = std::min(prefix, common_prefix(slot_tokens_[i], g.prompt));  // none if it failed
        } else if (std::min(prefix, g.prompt.size() - 1) * 2 < slot_tokens_[i].size()) {
          park_slot_locked(leader_slot);  // it keeps less than half of what it holds: save it all first
        }
        const size_t keep = take_slot_locked(leader_slot, prefix, g.prompt.size());
        s->slot = leader_slot;
        g.n_cached = keep;
        s->prompt_done = keep;
        s->pos = static_cast<int32_t>(keep);
        stats_.prompt_tokens_cached += keep;
      } else {
        s->slot = take_lru_slot_locked();
      }
      slot_used_[static_cast<size_t>(s->slot)] = ++use_clock_;
      s->epoch = cache_epoch_;
      reserved_ += s->reserve;
      s->admitted_order = ++admit_order_;
      s->t_admit = now;
    }
    for (auto& s : entry) {
      s->result.n_cached_tokens = static_cast<int>(g.n_cached);
      active_.push_back(std::move(s));
    }
  }
  stats_.pending = pending_.size();
  stats_.active = active_.size();
  stats_.prompt_tokens_pending = pending_prompt_tokens();
}

uint64_t BatchEngine::pending_prompt_tokens() const {
  uint64_t n = 0;
  for (const auto& s : active_) {
    if (!s->done && !s->generating && !s->awaits_prompt) n += s->group->prompt.size() - s->prompt_done;
  }
  return n;
}

void BatchEngine::retire(Seq& s, bool keep_cache) {
  s.done = true;
  std::lock_guard lock(mu_);
  // The slot keeps what its cells hold: positions 0..pos-1, the prompt and then the generated
  // tokens that were decoded (the last sampled one never is).
  auto& cached = slot_tokens_[static_cast<size_t>(s.slot)];
  cached.clear();
  if (keep_cache && s.epoch == cache_epoch_ && s.pos > 0) {
    const auto& prompt = s.group->prompt;
    const auto n = static_cast<size_t>(s.pos);
    cached.assign(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(std::min(n, prompt.size())));
    for (size_t i = 0; cached.size() < n && i < s.result.tokens.size(); ++i)
      cached.push_back(s.result.tokens[i]);
    slot_used_[static_cast<size_t>(s.slot)] = ++use_clock_;
  }
  if (cached.size() != static_cast<size_t>(std::max(s.pos, 0)) || cached.empty()) {
    cached.clear();
    ctx_->remove_sequence(s.slot);
    slot_used_[static_cast<size_t>(s.slot)] = 0;
  }
  free_slots_.push_back(s.slot);
  reserved_ -= s.reserve;
  if (--s.group->live == 0) reserved_ -= s.group->prompt_reserve;
  if (s.choice == 0) ++stats_.completed;  // requests
}

void BatchEngine::settle(Seq& s) {
  Group& g = *s.group;
  g.results[static_cast<size_t>(s.choice)] = std::move(s.result);
  if (--g.remaining == 0) complete(g);
}

void BatchEngine::complete(Group& g) {
  if (!g.error.ok()) {
    g.promise.set_value(g.error);
  } else if (g.results.size() == 1) {
    g.promise.set_value(std::move(g.results[0]));
  } else {
    GenerationResult r = g.results[0];
    r.choices = std::move(g.results);
    g.promise.set_value(std::move(r));
  }
  if (g.req.on_done) g.req.on_done();
}

bool BatchEngine::emit(Seq& s, std::string_view text) {
  const GenerationRequest& r = s.req();
  if (r.on_piece) {
    backend::TextPiece piece;
    piece.choice = s.choice;
    piece.text = text;
    piece.logprobs = std::span<const backend::TokenLogprob>(s.result.logprobs).subspan(s.logprobs_sent);
    s.logprobs_sent = s.result.logprobs.size();
    return r.on_piece(piece);
  }
  if (r.on_text && !text.empty()) return r.on_text(text);
  return true;
}

void BatchEngine::finish(Seq& s, FinishReason reason) {
  if (reason != FinishReason::kCancelled) {
    std::string tail = reason != FinishReason::kStopString ? s.stream.flush() : std::string();
    if (!tail.empty()) s.result.text += tail;
    if (!tail.empty() || s.logprobs_sent < s.result.logprobs.size()) emit(s, tail);
  }
  s.result.finish = reason;
  if (!s.result.tokens.empty()) s.result.generation_ms = ms_between(s.t_first, Clock::now());
  retire(s, /*keep_cache=*/true);
  settle(s);
}

void BatchEngine::fail(Seq& s, const Status& st) {
  retire(s, /*keep_cache=*/false);
  Group& g = *s.group;
  if (g.error.ok()) {
    g.error = st.with_context("sequence " + std::to_string(s.id) +
                              (g.results.size() > 1 ? " choice " + std::to_string(s.choice) : std::string()) +
                              " (after " + std::to_string(s.result.tokens.size()) + " generated tokens)");
  }
  g.cancel->store(true);  // the request has failed: its other choices stop
  settle(s);
}

void BatchEngine::sample(Seq& s) {
  const auto& weights = ctx_->weights();
  const int32_t n_vocab = weights.n_vocab();
  const GenerationRequest& req = s.req();
  if (req.n_top_logits > 0) {
    const float* logits = llama_get_logits_ith(ctx_->raw(), s.out_index);
    std::vector<std::pair<int32_t, float>> top;
    for (int32_t t = 0; t < n_vocab; ++t) top.emplace_back(t, logits[t]);
    const size_t k = std::min<size_t>(static_cast<size_t>(req.n_top_logits), top.size());
    std::partial_sort(top.begin(), top.begin() + static_cast<std::ptrdiff_t>(k), top.end(),
                      [](auto& a, auto& c) { return a.second > c.second; });
    top.resize(k);
    s.result.top_logits.push_back(std::move(top));
  }
  llama_token tok = -1;
  try {
    tok = llama_sampler_sample(s.sampler, ctx_->raw(), s.out_index);
  } catch (const std::exception& e) {
    // llama.cpp's grammar sampler throws when no token can continue the grammar: the request made
    // its own output impossible (e.g. a logit_bias banning every token a json_object may start with).
    fail(s, InvalidArgument(std::string("the output constraint cannot be met: llama.cpp's grammar found no "
                                        "allowed token to continue with (") +
                            e.what() +
                            "); a logit_bias or sampling setting that bans every token the grammar "
                            "allows makes constrained output impossible"));
    return;
  }
  if (s.result.tokens.empty()) {
    s.t_first = Clock::now();
    s.result.prompt_ms = ms_between(s.t_admit, s.t_first);
  }
  if (weights.is_eog(tok)) {
    finish(s, FinishReason::kEndOfGeneration);
    return;
  }
  s.result.tokens.push_back(tok);
  if (req.n_logprobs >= 0) {
    s.result.logprobs.push_back(token_logprob(weights, llama_get_logits_ith(ctx_->raw(), s.out_index),
                                              n_vocab, tok, req.n_logprobs, req.render_special));
  }
  const bool render = req.render_special || std::find(req.render_tokens.begin(), req.render_tokens.end(),
                                                      tok) != req.render_tokens.end();
  std::string text = s.stream.push(weights.token_to_piece(tok, render));
  bool keep_going = true;
  if (!text.empty()) {
    s.result.text += text;
    keep_going = emit(s, text);
  }
  if (s.stream.stopped()) {
    finish(s, FinishReason::kStopString);
  } else if (!keep_going) {
    s.group->cancel->store(true);  // the caller wants no more of any choice
    finish(s, FinishReason::kCancelled);
  } else if (static_cast<int>(s.result.tokens.size()) >= req.max_tokens) {
    finish(s, FinishReason::kMaxTokens);
  } else {
    s.generating = true;
    s.next_token = tok;
  }
}

void BatchEngine::plan_drafts(int32_t cap) {
  // Every generating sequence's own token comes first; drafts share what is left, in order.
  int32_t room = cap;
  for (auto& s : active_) {
    s->draft.clear();
    if (s->generating) --room;
  }
  std::vector<DraftRequest> requests;
  std::vector<Seq*> who;
  for (auto& s : active_) {
    if (!s->generating || s->done || room <= 0) continue;
    // At most max_tokens in all: the last draft token's successor is the last token sampled.
    const int left = s->req().max_tokens - static_cast<int>(s->result.tokens.size()) - 1;
    const int n = std::min({spec_->n_max(), left, room});
    if (n <= 0) continue;
    DraftRequest r;
    r.slot = s->slot;
    r.sequence = s->admitted_order;
    const auto& prompt = s->group->prompt;
    r.history.reserve(static_cast<size_t>(s->pos));
    r.history.assign(prompt.begin(), prompt.end());
    // The last generated token is next_token, not yet in the cache.
    r.history.insert(r.history.end(), s->result.tokens.begin(), s->result.tokens.end() - 1);
    if (r.history.size() != static_cast<size_t>(s->pos)) continue;  // not what the cache holds: no draft
    r.last = s->next_token;
    r.n_max = n;
    room -= n;
    requests.push_back(std::move(r));
    who.push_back(s.get());
  }
  spec_->draft(requests);
  for (size_t i = 0; i < who.size(); ++i) who[i]->draft = std::move(requests[i].draft);
}

void BatchEngine::verify(Seq& s) {
  // The cache holds s's token at s.pos - 1 and the draft after it. Row k (k = 0..n) predicts the
  // token after draft[k - 1]: sample it as without a draft; the draft's next token survives while
  // the sampled token equals it.
  const std::vector<int32_t> draft = std::move(s.draft);
  s.draft.clear();
  const int32_t first_row = s.out_index;
  const int32_t base = s.pos;  // position of draft[0]
  size_t k = 0;                // draft tokens accepted
  for (;;) {
    s.out_index = first_row + static_cast<int32_t>(k);
    s.pos = base + static_cast<int32_t>(k);  // the cache holds draft[0..k-1] as its own
    sample(s);
    if (s.done || k == draft.size() || s.next_token != draft[k]) break;
    ++k;
  }
  // Drop the cells of the rejected tail (all of them hold positions >= s.pos).
  llama_memory_seq_rm(llama_get_memory(ctx_->raw()), s.slot, s.pos, -1);
  spec_->accepted(s.slot, static_cast<int>(k));
  std::lock_guard lock(mu_);
  stats_.draft_tokens += draft.size();
  stats_.draft_accepted += k;
}

Result<bool> BatchEngine::step() {
  std::vector<std::vector<std::unique_ptr<Seq>>> cancelled;  // queued requests cancelled before admission
  {
    std::lock_guard lock(mu_);
    // cancel_all() ends the requests submitted before it (ids below cancel_before_), never later ones.
    const uint64_t before = cancel_before_.load();
    if (before > cancelled_before_) {
      for (auto& entry : pending_) {
        if (entry.front()->id < before) entry.front()->group->cancel->store(true);
      }
      for (auto& s : active_) {
        if (s->id < before) s->group->cancel->store(true);
      }
      cancelled_before_ = before;
    }
    admit_locked(cancelled);
  }
  // Their callbacks run, and their requests are destroyed, without the engine's lock held: what a
  // request holds (a model handle) may take the model manager's lock (docs/architecture.md, lock order).
  for (auto& entry : cancelled) {
    for (auto& s : entry) {
      s->result.finish = FinishReason::kCancelled;
      settle(*s);
    }
  }
  cancelled.clear();
  for (auto& s : active_) {
    if (!s->done && s->cancelled()) finish(*s, FinishReason::kCancelled);
  }
  active_.erase(std::remove_if(active_.begin(), active_.end(), [](auto& s) { return s->done; }),
                active_.end());
  if (active_.empty()) {
    std::lock_guard lock(mu_);
    stats_.active = 0;
    stats_.prompt_tokens_pending = 0;
    return false;
  }

  // What one batch holds: every generating sequence's token, then prompt chunks in the fair order (the
  // priority class first, so an interactive prompt is not evaluated behind a batch tenant's long one;
  // then the weighted fair tag; admission order among equals), at most prefill_chunk prompt tokens in
  // all (one sequence's with one_prompt_per_step; choices waiting for their leader's prompt take no part).
  auto& b = *batch_;
  b.clear();
  const auto cap = static_cast<size_t>(ctx_->n_batch());
  if (spec_) plan_drafts(static_cast<int32_t>(cap));
  std::vector<std::pair<Seq*, size_t>> parts;      // a sequence and its prompt tokens (0: its sampled token)
  size_t generated_tokens = 0, prompt_tokens = 0;  // sampled and draft tokens; prompt tokens
  for (auto& s : active_) {
    s->out_index = -1;
    s->in_batch = false;
    if (s->generating && generated_tokens < cap) {
      parts.emplace_back(s.get(), 0);
      generated_tokens += 1 + s->draft.size();
    }
  }
  std::vector<Seq*> prompting;
  for (auto& s : active_)
    if (!s->generating && !s->awaits_prompt) prompting.push_back(s.get());
  std::stable_sort(prompting.begin(), prompting.end(), [](const Seq* x, const Seq* y) {
    const auto &kx = x->group->key, &ky = y->group->key;
    return kx.priority != ky.priority ? kx.priority < ky.priority : kx.tag < ky.tag;
  });
  // Next to generating sequences, the step's prompt tokens are bounded in time as well as in number; so
  // are a batch tenant's (the first prompt in the fair order is of a lower class) even with none
  // generating: an interactive request arriving meanwhile waits at most one bounded step for its turn.
  size_t chunk = eopts_.prefill_chunk;
  const bool batch_prompt = !prompting.empty() && prompting.front()->group->key.priority > 0;
  if ((generated_tokens > 0 || batch_prompt) && eopts_.mixed_step_ms > 0 && ms_per_token_ > 0) {
    const double fit = eopts_.mixed_step_ms / ms_per_token_;
    const size_t least = std::min<size_t>(EngineOptions::kMinMixedChunk, chunk);  // prefill_chunk may be less
    chunk = std::clamp<size_t>(static_cast<size_t>(std::min(fit, 1e9)), least, chunk);
  }
  for (Seq* s : prompting) {
    const size_t used = generated_tokens + prompt_tokens;
    const size_t room =
        used >= cap || prompt_tokens >= chunk ? 0 : std::min(cap - used, chunk - prompt_tokens);
    if (room == 0) break;  // later prompts wait for the next step
    const size_t n = std::min(s->group->prompt.size() - s->prompt_done, room);
    if (n == 0) continue;
    parts.emplace_back(s, n);
    prompt_tokens += n;
    if (eopts_.one_prompt_per_step) break;
  }
  // In sequence order: with a KV stream per sequence llama.cpp splits a batch into micro-batches of
  // consecutive sequence ids, so an ordered batch is evaluated in as few of them as possible.
  std::sort(parts.begin(), parts.end(),
            [](const auto& x, const auto& y) { return x.first->slot < y.first->slot; });
  std::vector<Seq*> in_batch;
  std::vector<std::pair<Seq*, size_t>> chunks;
  for (const auto& [s, n] : parts) {
    if (n == 0) {
      s->out_index = b.batch.n_tokens;
      b.add(s->next_token, s->pos, s->slot, true);
      for (size_t i = 0; i < s->draft.size(); ++i)
        b.add(s->draft[i], s->pos + 1 + static_cast<llama_pos>(i), s->slot, true);
    } else {
      const auto& prompt = s->group->prompt;
      for (size_t i = 0; i < n; ++i) {
        const size_t k = s->prompt_done + i;
        const bool last = k + 1 == prompt.size();
        if (last) s->out_index = b.batch.n_tokens;
        b.add(prompt[k], static_cast<llama_pos>(k), s->slot, last);
      }
      chunks.emplace_back(s, n);
    }
    s->in_batch = true;
    in_batch.push_back(s);
  }

  // Abort a decode only when every sequence it serves has been cancelled.
  std::optional<QuietLlamaLogs> quiet;  // an intended abort makes llama.cpp log errors: keep them quiet
  ctx_->set_abort_check([&in_batch, &quiet, this] {
    const uint64_t before = cancel_before_.load(std::memory_order_relaxed);
    bool abort = true;
    for (Seq* s : in_batch) abort = abort && (s->cancelled() || s->id < before);
    if (abort && !quiet) quiet.emplace();
    return abort;
  });
  const auto decode_start = Clock::now();
  Status st = ctx_->decode(b.batch);
  ctx_->set_abort_check(nullptr);
  quiet.reset();
  // The time per token of steps large enough to tell (a step's fixed cost spread over few tokens would
  // overstate it), as a moving average: what mixed_step_ms divides.
  if (st.ok() && b.batch.n_tokens >= static_cast<int32_t>(EngineOptions::kMinMixedChunk)) {
    const double per = ms_between(decode_start, Clock::now()) / b.batch.n_tokens;
    ms_per_token_ = ms_per_token_ == 0 ? per : ms_per_token_ + 0.2 * (per - ms_per_token_);
  }
  {
    std::lock_guard lock(mu_);
    ++stats_.steps;
    stats_.tokens_decoded += static_cast<uint64_t>(b.batch.n_tokens);
    stats_.max_batch_seqs = std::max<uint64_t>(stats_.max_batch_seqs, in_batch.size());
    if (st.ok()) {
      stats_.prompt_tokens_decoded += prompt_tokens;
      if (prompt_tokens > 0 && generated_tokens > 0) ++stats_.mixed_steps;
    }
  }
  if (!st.ok()) {
    bool evicted = false;
    if (st.code() == StatusCode::kResourceExhausted) {
      // The cache is as before the call. Idle slots' cached prompts go first; the batch is retried.
      std::lock_guard lock(mu_);
      for (int32_t slot : free_slots_) {
        if (slot_tokens_[static_cast<size_t>(slot)].empty()) continue;
        drop_slot_cache_locked(slot);
        ++stats_.cache_evictions;
        evicted = true;
      }
    }
    if (evicted) {
      GANTRY_LOG_DEBUG("KV cache full: emptied the idle slots' prompt caches, retrying the step");
    } else if (st.code() == StatusCode::kResourceExhausted) {
      // The cache is as before the call: drop the newest sequence in the batch and go on with the rest.
      Seq* victim = *std::max_element(in_batch.begin(), in_batch.end(),
                                      [](Seq* a, Seq* c) { return a->admitted_order < c->admitted_order; });
      GANTRY_LOG_WARN("KV cache full: failing sequence {} so the others can go on", victim->id);
      fail(*victim, st);
    } else if (st.code() == StatusCode::kCancelled) {
      for (Seq* s : in_batch) finish(*s, FinishReason::kCancelled);
    } else {
      for (Seq* s : in_batch) fail(*s, st);
      active_.erase(std::remove_if(active_.begin(), active_.end(), [](auto& s) { return s->done; }),
                    active_.end());
      return st;
    }
    active_.erase(std::remove_if(active_.begin(), active_.end(), [](auto& s) { return s->done; }),
                  active_.end());
    return true;
  }

  for (auto& [s, n] : chunks) {
    s->prompt_done += n;
    s->pos = static_cast<int32_t>(s->prompt_done);
  }
  std::vector<Seq*> to_sample;
  for (Seq* s : in_batch) {
    if (s->out_index < 0) continue;  // prompt not finished yet
    if (s->generating) ++s->pos;     // the token just decoded now sits in the cache
    to_sample.push_back(s);
    // The prompt is in the cache now: the other choices continue from it and sample from its logits.
    for (Seq* f : s->followers) {
      if (f->done) continue;
      ctx_->copy_sequence(s->slot, f->slot);
      f->awaits_prompt = false;
      f->prompt_done = s->prompt_done;
      f->pos = s->pos;
      f->out_index = s->out_index;
      to_sample.push_back(f);
    }
    s->followers.clear();
  }
  for (Seq* s : to_sample) {
    if (s->done) continue;
    // One sequence's failure (a sampler, its stop strings, its caller's callback) ends that sequence
    // with an error, never the decoding thread or the sequences sharing its batch.
    try {
      if (s->draft.empty()) {
        sample(*s);
      } else {
        verify(*s);
      }
    } catch (const std::exception& e) {
      if (!s->done) fail(*s, Internal(std::string("generating the next token failed: ") + e.what()));
    } catch (...) {
      if (!s->done) fail(*s, Internal("generating the next token failed: an exception of unknown type"));
    }
  }
  active_.erase(std::remove_if(active_.begin(), active_.end(), [](auto& s) { return s->done; }),
                active_.end());
  {
    std::lock_guard lock(mu_);
    stats_.active = active_.size();
    stats_.prompt_tokens_pending = pending_prompt_tokens();
  }
  return true;
}

bool BatchEngine::drive_once() {
  std::lock_guard drive(drive_mu_);
  Result<bool> r = false;
  try {
    r = step();
  } catch (const std::exception& e) {
    r = fail_active(Internal(std::string("a decode step threw: ") + e.what()));
  } catch (...) {
    r = fail_active(Internal("a decode step threw an exception of unknown type"));
  }
  if (!r.ok()) {
    GANTRY_LOG_ERROR("decode step failed: {}", r.status().to_string());
    return true;
  }
  return *r;
}

Status BatchEngine::fail_active(const Status& why) {
  // What step() left half done is unknown: every running sequence ends with the error (its cells
  // are dropped), the queued ones stay queued, and the engine serves on.
  ctx_->set_abort_check(nullptr);
  for (auto& s : active_) {
    if (s->done) continue;
    try {
      fail(*s, why);
    } catch (...) {
      s->done = true;  // its caller's on_done threw: nothing more can be told to it
    }
  }
  active_.clear();
  std::lock_guard lock(mu_);
  stats_.active = 0;
  stats_.prompt_tokens_pending = 0;
  return why;
}

Result<GenerationResult> BatchEngine::wait(const SequenceHandle& h) {
  while (!h.ready()) {
    bool loop_running;
    {
      std::lock_guard lock(mu_);
      loop_running = running_;
    }
    if (loop_running) {
      h.result_.wait();
      break;
    }
    if (!drive_once() && !h.ready()) {
      // Nothing to decode yet the sequence is not done: another thread holds it; let it finish.
      h.result_.wait_for(std::chrono::milliseconds(1));
    }
  }
  return h.get();
}

Result<GenerationResult> BatchEngine::generate(GenerationRequest request) {
  GANTRY_ASSIGN_OR_RETURN(SequenceHandle h, submit(std::move(request)));
  return wait(h);
}

void BatchEngine::loop() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stop_requested_ || !pending_.empty() || stats_.active > 0; });
      if (stop_requested_) return;
    }
    drive_once();
  }
}

void BatchEngine::start() {
  std::lock_guard lock(mu_);
  if (running_) return;
  running_ = true;
  stop_requested_ = false;
  loop_ = std::thread([this] { loop(); });
}

void BatchEngine::stop() {
  {
    std::lock_guard lock(mu_);
    if (!running_) return;
    stop_requested_ = true;
  }
  cv_.notify_all();
  loop_.join();
  std::lock_guard lock(mu_);
  running_ = false;
}

void BatchEngine::cancel_all() {
  {
    std::lock_guard lock(mu_);
    cancel_before_.store(next_id_);  // every request submitted so far
  }
  cv_.notify_all();
}

void BatchEngine::clear_cache() {
  std::lock_guard drive(drive_mu_);  // no decode step runs meanwhile
  std::lock_guard lock(mu_);
  ++cache_epoch_;
  for (int32_t slot : free_slots_) drop_slot_cache_locked(slot, /*park=*/false);
  if (host_cache_) host_cache_->clear();
}

EngineStats BatchEngine::stats() const {
  EngineStats out;
  {
    std::lock_guard lock(mu_);
    out = stats_;
    out.kv_cells_reserved = reserved_;
  }
  out.kv_cells = ctx_->n_ctx();
  if (host_cache_) {
    const auto h = host_cache_->stats();
    out.host_cache_saves = h.saves;
    out.host_cache_restores = h.restores;
    out.host_cache_bytes = h.bytes;
    out.host_cache_tokens = h.tokens;
  }
  return out;
}

}  // namespace gantry::llama
