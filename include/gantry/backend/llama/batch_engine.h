// BatchEngine: continuous batching over ONE llama_context. Sequences join and leave between decode
// steps; each step decodes one llama_batch holding every active sequence's new tokens (prompt chunks
// plus one token per generating sequence), then samples each sequence with its own sampler chain.
//
// Prompt cache: a slot (llama.cpp sequence id) keeps the KV cells of the sequence that last used
// it, with the tokens they hold. A new request takes the free slot whose tokens share the longest
// prefix with its prompt (a match under a tenth of the prompt counts as none, as llama-server's
// --slot-prompt-similarity 0.1; ties: the least recently used; an empty slot counts as least used),
// removes that slot's cells from the first differing position and evaluates only the rest of the
// prompt; when the whole prompt matches, its last token is evaluated again for the logits. The
// output is exactly what an empty cache gives. In a unified cache the idle slots' cells count
// against n_ctx: a request that needs them evicts idle slots' contents (least recently used
// first) before it waits, and a decode that finds no room evicts them all and is retried.
// clear_cache() empties every slot. EngineOptions::cache_prompt false turns the cache off.
//
// Host-memory prompt cache (EngineOptions::cache_ram_bytes, llama-server's --cache-ram): what an
// idle slot holds is saved to host memory before it is lost (the slot is taken by a prompt that
// keeps less than half of it, by a request's other choices, or emptied to make room); a request
// whose prompt shares a longer prefix with a saved state than with any slot gets it restored into
// the least recently used free slot and evaluates only the rest (src/backend/llama/host_prompt_cache.h:
// limits, budget charging, giving bytes back under memory pressure). Same output as without it.
//
// Chunked prefill: each step holds one token of every generating sequence and at most
// EngineOptions::prefill_chunk (default n_ubatch) prompt tokens, taken from the admitted prompts in the
// fair order (GenerationRequest::schedule: the interactive class before batch, then the weighted fair
// tag; without tenants that is admission order). A long prompt is thus evaluated in pieces between the
// running sequences' tokens instead of stalling them, and an interactive prompt goes before a batch
// tenant's long one rather than after it. While sequences generate, a step's prompt tokens are also
// bounded in time (EngineOptions::mixed_step_ms over the measured time per token).
//
// Threads: submit() and generate() from any thread. Exactly one thread decodes at a time: the
// background loop (start()), or else whichever generate()/step() caller holds the engine. Text
// callbacks run on the decoding thread and must not block for long.
//
// Admission: a sequence waits until a slot (n_seq_max) is free and its KV reservation
// (prompt + max_tokens, capped at n_ctx_seq) fits next to the active ones', so a correctly sized
// context never runs out of KV space mid-generation. If it does anyway (llama_decode returns 1),
// the most recently admitted sequence in the batch fails with ResourceExhausted and the rest go on.
//
// Choices (GenerationRequest::n_choices = n): one request becomes n sequences admitted together
// (n free slots, n reservations). The first decodes the prompt; once its last prompt token is
// decoded its cache is copied to the others (llama_memory_seq_cp) and all n sample their first
// token from that one row of logits, each with its own sampler, then go on independently. One
// sequence failing fails the request (the others are cancelled).
//
// Speculative decoding (gantry/backend/llama/speculative.h, when create() is given it): before each
// step the generating sequences get drafts (at most draft_max tokens, within max_tokens and the
// batch's room), which go into the step's batch after each sequence's own token; after the decode each
// such sequence samples row by row, keeps the drafted tokens it agrees with and the one after them,
// and the cells of the rest are removed. The prompt cache sees only accepted tokens.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "gantry/backend/generation.h"
#include "gantry/backend/llama/context.h"
#include "gantry/backend/llama/options.h"
#include "gantry/backend/llama/speculative.h"
#include "gantry/backend/llama/weights.h"
#include "gantry/core/status.h"

namespace gantry::llama {

class HostPromptCache;

// The caller's handle on a submitted sequence.
class SequenceHandle {
 public:
  uint64_t id() const { return id_; }
  // Asks the engine to stop this sequence between decode steps (and abort a decode that only
  // serves cancelled sequences). Its result then has finish == kCancelled.
  void cancel() const { cancel_->store(true, std::memory_order_relaxed); }
  // Blocks until the sequence ends (only when a background loop or another caller drives the engine;
  // use BatchEngine::wait otherwise).
  Result<backend::GenerationResult> get() const { return result_.get(); }
  bool ready() const { return result_.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }

 private:
  friend class BatchEngine;
  uint64_t id_ = 0;
  std::shared_ptr<std::atomic<bool>> cancel_;
  std::shared_future<Result<backend::GenerationResult>> result_;
};

struct EngineStats {
  uint64_t steps = 0;                  // llama_decode calls
  uint64_t tokens_decoded = 0;         // tokens in those batches
  uint64_t prompt_tokens_decoded = 0;  // of those, prompt tokens (a request's choices share theirs)
  uint64_t prompt_tokens_cached = 0;   // prompt tokens taken from the prompt cache instead
  uint64_t prompt_tokens_pending = 0;  // admitted prompts' tokens not yet evaluated (prefill backlog)
  uint64_t mixed_steps = 0;            // steps that decoded prompt tokens next to generating sequences'
  uint64_t cache_evictions = 0;        // idle slots emptied to make room
  uint64_t host_cache_saves = 0;       // slot states saved to the host prompt cache
  uint64_t host_cache_restores = 0;    // and restored from it into a slot
  uint64_t host_cache_bytes = 0;       // host memory the host prompt cache holds now
  uint64_t host_cache_tokens = 0;      // tokens its entries hold now
  uint64_t max_batch_seqs = 0;         // most sequences in one batch
  uint64_t completed = 0;              // sequences finished (any reason, errors included)
  uint64_t draft_tokens = 0;           // tokens drafted and verified (speculative decoding)
  uint64_t draft_accepted = 0;         // of those, tokens the target agreed with
  size_t active = 0;                   // sequences
  size_t pending = 0;                  // requests
  // The KV cache: cells held for the running requests (prompt and max_tokens each, as admission
  // reserves them; idle slots' reusable prompt cache not counted) out of all of them (n_ctx).
  size_t kv_cells_reserved = 0;
  size_t kv_cells = 0;
};

class Speculator;

class BatchEngine {
 public:
  // With `speculative` enabled (a draft model or an n-gram type), decodes speculatively; its errors
  // (a draft with another vocabulary, ...) are create()'s.
  static Result<std::unique_ptr<BatchEngine>> create(std::shared_ptr<const LlamaWeights> weights,
                                                     const ContextOptions& options,
                                                     const EngineOptions& engine = {},
                                                     const SpeculativeOptions& speculative = {});
  ~BatchEngine();  // stops the loop; unfinished sequences end as cancelled
  BatchEngine(const BatchEngine&) = delete;
  BatchEngine& operator=(const BatchEngine&) = delete;

  // Validates the request (sampling parameters, logit_bias ids in the vocabulary, max_tokens,
  // n_choices in 1..n_seq_max, at most one of on_text/on_piece, prompt fits the context: else
  // backend::context_length_exceeded), compiles its output constraint to a grammar on the calling
  // thread (never the decoding loop) and queues it. Errors here are the request's fault
  // (InvalidArgument); the handle's result carries errors found later. The handle stands for the
  // whole request: all its choices, one result.
  Result<SequenceHandle> submit(backend::GenerationRequest request);

  // submit + wait, driving the engine from this thread when no background loop runs.
  Result<backend::GenerationResult> generate(backend::GenerationRequest request);
  // Waits for `handle`, driving the engine from this thread when no background loop runs.
  Result<backend::GenerationResult> wait(const SequenceHandle& handle);

  // One decode step (admit, batch, decode, sample, retire). Returns false when there was nothing to
  // do. Engine-wide failures are returned and also fail the sequences in that batch.
  Result<bool> step();

  void start();  // background decode loop
  void stop();   // joins it; queued sequences stay queued
  // Every request submitted before this call (queued or running) ends cancelled, as of the next
  // step; requests submitted afterwards are not affected, even when the engine was idle.
  void cancel_all();
  // Empties the prompt cache (and the host prompt cache): idle slots now, running sequences' slots
  // when they end. Waits for a running decode step.
  void clear_cache();

  EngineStats stats() const;
  bool speculative() const { return spec_ != nullptr; }
  LlamaContext& context() { return *ctx_; }
  const LlamaWeights& weights() const { return ctx_->weights(); }

  // Tokens a prompt becomes (as submit() would tokenize it).
  Result<std::vector<int32_t>> tokenize_prompt(const backend::GenerationRequest& request) const;

 private:
  struct Seq;
  struct Group;
  BatchEngine() = default;
  // Admits what fits; queued requests found cancelled go to `cancelled` for the caller to settle once
  // the lock is released.
  void admit_locked(std::vector<std::vector<std::unique_ptr<Seq>>>& cancelled);
  // The free slot for a request's leader: longest common prefix with `prompt` when it is at least a
  // tenth of the prompt (none when not `reuse`), then least recently used. Returns it and the prefix it
  // shares with `prompt` (kept even when under a tenth; 0 when not `reuse`).
  std::pair<int32_t, size_t> best_slot_locked(const std::vector<int32_t>& prompt, bool reuse) const;
  // Takes `slot` from free_slots_, drops its cells past the reusable prefix (at most prompt_size - 1)
  // and returns how many prompt tokens it still holds.
  size_t take_slot_locked(int32_t slot, size_t prefix, size_t prompt_size);
  int32_t take_lru_slot_locked();           // any free slot (LRU first), its cache emptied
  int32_t lru_slot_locked() const;          // the least recently used free slot (empty ones first)
  size_t idle_cached_cells_locked() const;  // cells the free slots' caches hold
  // Saves what idle `slot` holds to the host prompt cache (when there is one and it holds anything).
  void park_slot_locked(int32_t slot);
  // Replaces what free `slot` holds with host cache entry `id` (slot_tokens_ then says what it holds:
  // nothing when the restore failed).
  void restore_slot_locked(int32_t slot, uint64_t id);
  // Empties idle slots (LRU first, never `spare`) until `need` more cells fit in n_ctx next to the
  // reservations. False when even an empty cache would not make room.
  bool evict_idle_locked(size_t need, size_t n_ctx, int32_t spare);
  void drop_slot_cache_locked(int32_t slot, bool park = true);  // park: save it to host memory first
  void finish(Seq& s, backend::FinishReason reason);
  void fail(Seq& s, const Status& st);
  void retire(Seq& s, bool keep_cache);  // frees the slot; keep_cache: its cells stay as a prompt cache
  void settle(Seq& s);  // records an ended sequence's result in its group; completes the group
  static void complete(Group& g);
  bool emit(Seq& s, std::string_view text);  // to the request's callback; false: cancel
  void sample(Seq& s);                       // samples s's next token from its output row and handles it
  void plan_drafts(int32_t room);  // drafts for the generating sequences, at most `room` tokens in all
  void verify(Seq& s);             // sample() over s's own row and its draft's, keeping what it agrees with
  void loop();
  bool drive_once();
  // After a step threw: fails every running sequence with `why` and returns it (decoding thread).
  Status fail_active(const Status& why);
  uint64_t pending_prompt_tokens() const;  // of the admitted prompts (decoding thread)

  std::unique_ptr<LlamaContext> ctx_;
  std::unique_ptr<Speculator> spec_;             // null: no speculative decoding
  EngineOptions eopts_;                          // prefill_chunk resolved
  double ms_per_token_ = 0;                      // decode time per batch token, recent steps (0: none yet)
  std::unique_ptr<HostPromptCache> host_cache_;  // null when off
  mutable std::mutex mu_;                        // guards pending_, free_slots_, reserved_, stats_, running_
  std::condition_variable cv_;
  std::deque<std::vector<std::unique_ptr<Seq>>> pending_;  // a request's sequences, leader first
  backend::FairQueue fair_;                                // pending_'s order (guarded by mu_)
  std::vector<std::unique_ptr<Seq>> active_;               // touched only by the decoding thread
  std::vector<int32_t> free_slots_;
  // Per slot: the tokens its KV cells hold (positions 0..size-1) and when it was last used. A slot
  // in free_slots_ is idle; its cache waits for a request that shares a prefix.
  std::vector<std::vector<int32_t>> slot_tokens_;
  std::vector<uint64_t> slot_used_;
  uint64_t use_clock_ = 0;
  uint64_t cache_epoch_ = 0;  // clear_cache() bumps it; sequences admitted before keep nothing
  size_t reserved_ = 0;
  uint64_t next_id_ = 1;
  uint64_t admit_order_ = 0;
  EngineStats stats_;
  std::mutex drive_mu_;  // one decoding thread at a time
  std::thread loop_;
  bool running_ = false;
  bool stop_requested_ = false;
  std::atomic<uint64_t> cancel_before_{0};  // cancel_all(): requests with smaller ids end
  uint64_t cancelled_before_ = 0;           // the cancel_before_ step() has applied (under mu_)
  struct BatchBuf;
  std::unique_ptr<BatchBuf> batch_;
};

}  // namespace gantry::llama
