// Plain-data options for the llama.cpp engine: where a model goes (from the planner), how a context
// is sized, how tokens are sampled, and what one generation request asks for.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::llama {

// Where the weights go. The planner decides; the engine only applies it.
struct LlamaPlacement {
  int n_gpu_layers = 0;  // layers offloaded to GPUs; -1 = all; 0 = CPU only
  std::vector<float>
      tensor_split;  // share of the offloaded layers per GPU (proportions); empty = llama's default
  int main_gpu = 0;  // GPU holding the whole model when split_mode is kNone
  enum class SplitMode { kNone, kLayer, kRow } split_mode = SplitMode::kLayer;
};

struct LoadOptions {
  LlamaPlacement placement;
  bool use_mmap = true;
  bool check_tensors = false;  // let llama.cpp validate tensor data while loading (slow)
};

// Element type of the KV cache.
enum class KvType { kF16, kF32, kBF16, kQ8_0, kQ4_0 };
std::string_view kv_type_name(KvType t);
Result<KvType> parse_kv_type(std::string_view text);  // "f16", "q8_0", ...

enum class FlashAttn { kAuto, kOn, kOff };

// How embeddings of one sequence are pooled.
enum class Pooling { kModel, kNone, kMean, kCls, kLast };

struct ContextOptions {
  uint32_t n_ctx = 2048;    // KV cells in all (shared by the sequences when kv_unified)
  uint32_t n_batch = 512;   // most tokens in one llama_decode
  uint32_t n_ubatch = 512;  // physical micro-batch
  uint32_t n_seq_max = 1;   // parallel sequences (slots)
  int n_threads = 0;        // threads for single-token steps; 0 = hardware concurrency
  int n_threads_batch = 0;  // threads for prompt batches; 0 = n_threads
  KvType type_k = KvType::kF16;
  KvType type_v = KvType::kF16;
  FlashAttn flash_attn = FlashAttn::kAuto;
  bool kv_unified = true;   // sequences draw on one pool of n_ctx cells
  bool embeddings = false;  // extract embeddings instead of logits
  Pooling pooling = Pooling::kModel;
  // Own ggml CPU threadpool(s) whose workers poll briefly between steps (as llama-bench and
  // llama-server do); cheaper single-token steps than starting threads for every graph.
  bool threadpool = true;
  int threadpool_poll = 50;  // 0..100: how long idle workers spin before sleeping
};

// Sampling; defaults are llama.cpp's (common/common.h). temperature == 0 means greedy.
struct SamplingParams {
  float temperature = 0.8f;     // >= 0
  int top_k = 40;               // >= 0; 0 = off
  float top_p = 0.95f;          // (0, 1]; 1 = off
  float min_p = 0.05f;          // [0, 1]; 0 = off
  float repeat_penalty = 1.0f;  // > 0; 1 = off
  int repeat_last_n = 64;       // >= -1; tokens the penalty looks back over (-1 = whole context)
  uint32_t seed = 0xFFFFFFFFu;  // 0xFFFFFFFF = a random seed
};

// Checks every field; the message names the bad one and its allowed range.
Status validate(const SamplingParams& p);

enum class FinishReason { kEndOfGeneration, kMaxTokens, kStopString, kCancelled };
std::string_view finish_reason_name(FinishReason r);  // "eog", "max_tokens", "stop", "cancelled"

// Receives each new piece of generated text (valid UTF-8, stop strings held back). Return false to
// cancel the generation.
using TextCallback = std::function<bool(std::string_view text)>;

struct GenerationRequest {
  std::string prompt;             // used when `tokens` is empty
  std::vector<int32_t> tokens;    // pre-tokenized prompt
  bool add_special = true;        // add BOS (as the model's vocabulary asks)
  bool parse_special = true;      // "<s>" in the prompt text becomes the special token
  bool render_special = true;     // show special tokens in the output text (as llama.cpp's tools do)
  int max_tokens = 128;           // >= 1
  std::vector<std::string> stop;  // generation ends before the first occurrence of any
  SamplingParams sampling;
  TextCallback on_text;  // optional
  int n_top_logits = 0;  // record the n largest raw logits at each generated token
};

struct GenerationResult {
  std::string text;             // everything generated (stop string excluded)
  std::vector<int32_t> tokens;  // the generated tokens
  int n_prompt_tokens = 0;
  FinishReason finish = FinishReason::kMaxTokens;
  double prompt_ms = 0;      // time from admission to the first generated token
  double generation_ms = 0;  // time from the first to the last generated token
  // Per generated token (when n_top_logits > 0): the largest raw logits, best first, as (token, logit).
  std::vector<std::vector<std::pair<int32_t, float>>> top_logits;
};

}  // namespace gantry::llama
