// Builds llama.cpp sampler chains from SamplingParams (the order llama.cpp's common sampling uses).
#pragma once

#include <cstdint>

#include "gantry/backend/generation.h"

struct llama_sampler;

namespace gantry::llama {

// penalties -> (greedy | top_k -> top_p -> min_p -> temperature -> dist(seed)). The caller frees it
// with llama_sampler_free. `params` must have passed validate().
llama_sampler* make_sampler_chain(const backend::SamplingParams& params, int32_t n_vocab,
                                  int32_t penalty_window);

}  // namespace gantry::llama
