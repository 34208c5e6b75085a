// Speculator: the drafting half of speculative decoding for one BatchEngine (see
// gantry/backend/llama/speculative.h for what it does). It owns the draft model's context and
// llama.cpp's common_speculative state; the engine verifies the drafts. Driven only by the engine's
// decoding thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "gantry/backend/llama/context.h"
#include "gantry/backend/llama/speculative.h"
#include "gantry/core/status.h"

struct common_speculative;

namespace gantry::llama {

// One generating sequence that wants a draft this step.
struct DraftRequest {
  int32_t slot = -1;             // its llama.cpp sequence id
  uint64_t sequence = 0;         // the engine's sequence; a new one in a slot starts afresh
  std::vector<int32_t> history;  // the tokens the target holds for it (positions 0..size-1)
  int32_t last = -1;             // its sampled token, decoded next at position history.size()
  int n_max = 0;                 // most tokens this draft may have (>= 1)
  std::vector<int32_t> draft;    // out: the drafted tokens (possibly none)
};

class Speculator {
 public:
  // `target` must outlive the speculator. Errors: InvalidArgument for a draft with another
  // vocabulary or a model whose memory cannot drop a sequence's tail (recurrent), unknown types;
  // the draft context's own errors (ResourceExhausted when it does not fit).
  static Result<std::unique_ptr<Speculator>> create(const LlamaContext& target,
                                                    const SpeculativeOptions& options);
  ~Speculator();
  Speculator(const Speculator&) = delete;
  Speculator& operator=(const Speculator&) = delete;

  int n_max() const { return n_max_; }  // the longest draft any type gives
  bool has_draft_model() const { return draft_ != nullptr; }

  // Fills each request's `draft`. Never fails: a problem (the draft's cache full, a decode error)
  // leaves drafts empty for this step and is logged.
  void draft(std::span<DraftRequest> requests);
  // After the target has verified the last draft of `slot`: `n_accepted` of its tokens were kept.
  void accepted(int32_t slot, int n_accepted);

 private:
  Speculator() = default;
  // Brings the draft context's cells of each request's slot towards exactly its history (at most
  // n_ubatch tokens evaluated a step); `ready[i]`: request i's are there. False when the decode failed
  // (the requests then get no draft).
  bool sync(std::span<DraftRequest> requests, std::vector<bool>& ready);
  void drop(int32_t slot);  // empties the draft's cells of `slot`

  SpeculativeOptions options_;
  std::unique_ptr<LlamaContext> draft_;  // null without a draft model
  common_speculative* spec_ = nullptr;
  int n_max_ = 0;
  bool needs_begin_ = false;                // some type keeps per-sequence state (common_speculative_begin)
  std::vector<std::vector<int32_t>> held_;  // per slot: the tokens the draft's cells hold
  std::vector<uint64_t> owner_;             // per slot: the sequence its state belongs to
  std::vector<bool> drafted_;               // per slot: accepted() is due for its last draft
};

}  // namespace gantry::llama
