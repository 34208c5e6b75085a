// HostPromptCache: sequence states parked in host memory (llama-server's --cache-ram). When the
// BatchEngine is about to lose what an idle slot's KV cells hold (the slot is taken for a prompt
// that keeps less than half of it, or emptied to make room), it saves that sequence's state here
// (llama_state_seq_get_data) with the tokens the cells hold. A later request whose prompt shares a
// longer prefix with a saved state than with any slot has it restored into a slot
// (llama_state_seq_set_data) and evaluates only the rest of its prompt.
//
// Entries: at most `limit` bytes in all, the least recently saved dropped first; saving a state
// drops the entries whose tokens it extends (it holds them), and a state whose tokens an entry
// already extends is not saved. A restored entry leaves the cache: its cells are a slot's again, and
// are saved anew when that slot's content is next about to be lost.
//
// Memory: every entry's bytes are reserved in `budget` under `owner` while the entry lives, and the
// cache is the budget's reclaimer for `owner`: another owner's reservation or allocation that does
// not fit takes entries back (oldest first) before anything else is tried (before any model is
// evicted). A save the budget refuses even after this cache gave up its own older entries is skipped. The
// entry a request is about to restore is taken out first (take), so the save of the slot it goes into cannot
// drop it.
//
// Threads: save() and restore() touch the llama_context: only the engine's decoding thread calls
// them. The budget may call the reclaimer from any thread. Every method is thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "gantry/core/status.h"

struct llama_context;

namespace gantry::memory {
class Budget;
}

namespace gantry::llama {

class HostPromptCache {
 public:
  // `limit`: bytes at most (EngineOptions::kUnlimited: only the budget limits it); must be > 0.
  // `budget` may be null (no accounting).
  HostPromptCache(uint64_t limit, memory::Budget* budget, std::string owner);
  ~HostPromptCache();  // gives every byte back to the budget
  HostPromptCache(const HostPromptCache&) = delete;
  HostPromptCache& operator=(const HostPromptCache&) = delete;

  struct Match {
    uint64_t id = 0;    // 0: none
    size_t prefix = 0;  // tokens the entry shares with the prompt
    size_t size = 0;    // tokens the entry holds
  };
  // The entry sharing the longest prefix with `prompt` (ties: the most recently saved), among those
  // that would keep at least a quarter of what they hold (llama-server's rule: a restore that throws
  // most of a large state away is not worth it). id 0 when none.
  Match best(const std::vector<int32_t>& prompt) const;

  // Saves `seq`'s state, whose cells hold `tokens` (positions 0..n-1). False when skipped (already
  // held, larger than the limit, refused by the budget, or llama.cpp could not read it out).
  bool save(llama_context* ctx, int32_t seq, const std::vector<int32_t>& tokens);

  // An entry taken out of the cache; its bytes stay reserved until it is restored or dropped.
  class Taken {
   public:
    Taken(Taken&& o) noexcept;
    Taken& operator=(Taken&&) = delete;
    ~Taken();
    const std::vector<int32_t>& tokens() const { return tokens_; }

   private:
    friend class HostPromptCache;
    Taken(HostPromptCache* cache, std::vector<int32_t> tokens, std::vector<uint8_t> state);
    HostPromptCache* cache_;
    std::vector<int32_t> tokens_;
    std::vector<uint8_t> state_;
  };
  // Takes entry `id` out (a save meanwhile cannot drop it). NotFound when it is gone (reclaimed).
  Result<Taken> take(uint64_t id);
  // Writes `entry` into `seq` (whatever `seq` held is removed first). Returns the tokens the
  // restored cells hold; Internal when llama.cpp refused the state (`seq` is then empty).
  Result<std::vector<int32_t>> restore(llama_context* ctx, int32_t seq, Taken entry);

  // Drops the least recently saved entries until `wanted` bytes are freed (or none is left).
  // Returns the bytes freed.
  uint64_t shed(uint64_t wanted);
  void clear();

  struct Stats {
    uint64_t bytes = 0;    // held now
    uint64_t entries = 0;  // held now
    uint64_t tokens = 0;   // held now, in all entries
    uint64_t saves = 0;
    uint64_t restores = 0;
    uint64_t shed_bytes = 0;  // given back on request (budget pressure), not counting limit drops
  };
  Stats stats() const;

 private:
  struct Entry {
    uint64_t id = 0;
    std::vector<int32_t> tokens;
    std::vector<uint8_t> state;
  };
  void drop_front_locked();                           // the oldest entry
  void erase_locked(std::deque<Entry>::iterator it);  // gives its bytes back
  void give_back(uint64_t bytes);                     // to the budget

  const uint64_t limit_;
  memory::Budget* const budget_;
  const std::string owner_;
  uint64_t reclaimer_id_ = 0;
  mutable std::mutex mu_;
  std::deque<Entry> entries_;  // oldest first
  uint64_t next_id_ = 1;
  Stats stats_;
};

}  // namespace gantry::llama
