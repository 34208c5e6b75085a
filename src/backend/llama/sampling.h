// Builds llama.cpp sampler chains from SamplingParams (the order llama.cpp's common sampling uses).
#pragma once

#include <cstdint>
#include <span>

#include "gantry/backend/generation.h"

struct llama_sampler;

namespace gantry::llama {

// [logit bias] -> [penalties] -> [grammar] -> (greedy | top_k -> top_p -> min_p -> temperature ->
// dist(seed)). The caller frees it with llama_sampler_free. `params` must have passed validate() and
// its logit_bias ids be in the vocabulary.
// `history` (the prompt) is what the penalties start from; only the penalties see it, so a
// grammar sampler starts at its root. `grammar` (may be null) becomes owned by the chain; it comes
// before the truncating samplers so they only ever keep tokens the grammar allows.
llama_sampler* make_sampler_chain(const backend::SamplingParams& params, int32_t n_vocab,
                                  int32_t penalty_window, std::span<const int32_t> history,
                                  llama_sampler* grammar = nullptr);

}  // namespace gantry::llama
