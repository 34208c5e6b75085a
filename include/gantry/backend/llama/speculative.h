// Speculative decoding in the BatchEngine, as llama-server does it: between decode steps every
// generating sequence may get a draft (a few tokens guessed cheaply), the target model evaluates each
// sequence's last token and its draft in the same batch as everything else, and the sequence keeps
// the drafted tokens its own sampler would have chosen, plus one more (the first one it disagrees on,
// or the token after a fully accepted draft). Rejected tokens' KV cells are removed. The output is the
// output without speculation, token for token, for greedy and seeded sampling alike (the sampler
// sees the same rows in the same order; llama.cpp's common_sampler_sample_and_accept_n), up to
// llama.cpp's rounding: a row computed in a batch differs from the same row alone in the last bits,
// which can tip a near-tie (as batching several sequences together can without speculation).
//
// Drafts come from llama.cpp's common/speculative.h:
// - a draft model (llama-server's --model-draft, type draft-simple): a second, smaller GGUF with the
//   target's vocabulary, in its own context of the target's size with one sequence per slot. Before a
//   step it is brought up to the tokens the target holds for each drafting sequence (evaluating only
//   what it lacks), then drafts up to draft_max tokens for all of them in one batch per position;
//   a token whose probability (top-10 softmax) is below draft_p_min ends that draft, and a draft
//   shorter than draft_min is dropped.
// - prompt lookup (llama-server's --spec-type ngram-simple, ngram-map-k, ngram-map-k4v, ngram-mod,
//   ngram-cache): drafts copied from earlier in the sequence's own tokens, for outputs that repeat the
//   prompt (edits, rewrites, code). No model, no memory.
// With both, the n-gram types go first and the draft model serves the sequences they found nothing for.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gantry/backend/llama/options.h"
#include "gantry/backend/llama/weights.h"

namespace gantry::llama {

struct SpeculativeOptions {
  // The draft model (null: none). Its vocabulary must match the target's (same type, BOS/EOS, size
  // within 128 and the same token texts: llama.cpp's common_speculative_are_compatible).
  std::shared_ptr<const LlamaWeights> draft;
  // The draft's context. n_ctx, n_seq_max, n_batch, n_ubatch and kv_unified are taken from the
  // target's context; the rest (threads, KV type, flash attention) as given here.
  ContextOptions draft_context;
  int draft_max = 3;         // most tokens one draft has (--spec-draft-n-max); 0: the draft is unused
  int draft_min = 0;         // a shorter draft is not used (--spec-draft-n-min)
  float draft_p_min = 0.0f;  // least probability of a drafted token (--spec-draft-p-min)
  // Draft-free types by llama-server's --spec-type names (ngram-simple, ngram-map-k, ngram-map-k4v,
  // ngram-mod, ngram-cache; "none" and "draft-simple" add nothing).
  std::vector<std::string> types;
  int ngram_size_n = 12;  // n-gram looked up in the sequence's tokens (ngram-simple, ngram-map-k*)
  int ngram_size_m = 48;  // most tokens copied after a match

  bool enabled() const;
};

// Checks that `draft` can draft for `target` (llama.cpp's rules, above). InvalidArgument says what
// differs, naming both files.
Status check_draft_vocabulary(const LlamaWeights& target, const LlamaWeights& draft);

}  // namespace gantry::llama
