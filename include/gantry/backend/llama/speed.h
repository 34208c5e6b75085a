// Prompt-processing (pp) and generation (tg) speed, measured the way llama.cpp's llama-bench does:
// pp = decode n_prompt tokens in batches of n_batch; tg = n_gen single-token decodes; a fresh context
// of n_prompt + n_gen cells per test, one warm-up run, then `reps` timed runs on a cleared cache.
// Decodes go through Gantry's LlamaContext (its threads and threadpool), tokens are random.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gantry/backend/generation.h"
#include "gantry/backend/llama/options.h"
#include "gantry/backend/llama/weights.h"
#include "gantry/core/status.h"

namespace gantry::llama {

// The generic options plus what the llama.cpp context needs; the result is the generic one.
struct SpeedOptions : backend::ThroughputOptions {
  KvType kv_type = KvType::kF16;
  FlashAttn flash_attn = FlashAttn::kAuto;
};
using SpeedResult = backend::ThroughputResult;

Result<std::vector<SpeedResult>> measure_speed(std::shared_ptr<const LlamaWeights> weights,
                                               const SpeedOptions& options);

}  // namespace gantry::llama
