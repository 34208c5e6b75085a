// Prompt-processing (pp) and generation (tg) speed, measured the way llama.cpp's llama-bench does:
// pp = decode n_prompt tokens in batches of n_batch; tg = n_gen single-token decodes; a fresh context
// of n_prompt + n_gen cells per test, one warm-up run, then `reps` timed runs on a cleared cache.
// Decodes go through Gantry's LlamaContext (its threads and threadpool), tokens are random.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gantry/backend/llama/options.h"
#include "gantry/backend/llama/weights.h"
#include "gantry/core/status.h"

namespace gantry::llama {

struct SpeedOptions {
  int n_prompt = 512;  // 0: skip the pp test
  int n_gen = 128;     // 0: skip the tg test
  int n_threads = 0;   // 0: hardware concurrency
  int reps = 5;
  uint32_t n_batch = 2048;
  uint32_t n_ubatch = 512;
  plan::KvType kv_type = plan::KvType::kF16;
  FlashAttn flash_attn = FlashAttn::kAuto;
  bool threadpool = true;  // ContextOptions::threadpool (llama-bench attaches one too)
};

struct SpeedResult {
  std::string test;  // "pp512", "tg128"
  int n_prompt = 0;
  int n_gen = 0;
  std::vector<double> samples_ts;  // tokens/s of each timed run
  double avg_ts = 0;
  double stddev_ts = 0;  // sample standard deviation (as llama-bench)
};

Result<std::vector<SpeedResult>> measure_speed(std::shared_ptr<const LlamaWeights> weights,
                                               const SpeedOptions& options);

}  // namespace gantry::llama
