// Options only one backend reads, typed, and checked when a manifest is parsed (or a CLI flag read) rather
// than when a model loads. Generic code (the factory, the runtime, Placement) carries them without looking
// inside: the ONNX Runtime backend reads OnnxOptions, the llama.cpp backend LlamaOptions.
//
// In gantry.json the ONNX Runtime options keep their historic places (hardware_requirements.
// graph_optimization_level, runtime.memory_pattern/cpu_arena/session_buckets); llama.cpp's are the
// "llama" object:
//   "llama": {"n_ctx": 4096, "parallel": 2, "n_batch": 512, "n_ubatch": 512, "n_gpu_layers": -1,
//             "tensor_split": [3, 1], "kv_type": "q8_0", "flash_attn": "auto", "mmap": true, "max_tokens":
//             128, "draft_model": "draft.gguf", "draft_max": 3, "draft_min": 0, "draft_p_min": 0.0,
//             "spec_type": "ngram-simple", "spec_ngram_size_n": 12, "spec_ngram_size_m": 48,
//             "kv_unified": false, "cache_prompt": true, "cache_ram": 8192, "prefill_chunk": 512,
//             "rpc": ["10.0.0.2:50052", "10.0.0.3:50052"]}
// A manifest that sets one backend's options for the other backend's format is refused.
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/kv_type.h"
#include "gantry/core/shape.h"
#include "gantry/core/status.h"

namespace gantry::model {

// ONNX Runtime graph optimisation level; values equal ORT's GraphOptimizationLevel enum.
enum class GraphOptimizationLevel { kDisable = 0, kBasic = 1, kExtended = 2, kAll = 99 };
std::string_view graph_optimization_level_name(GraphOptimizationLevel l);  // "disable" | ... | "all"
// Accepts "disable|basic|extended|all" and the numbers 0|1|2|3|99 as text ("3" and "99" both mean all).
std::optional<GraphOptimizationLevel> parse_graph_optimization_level(std::string_view text);
// Every accepted spelling, for messages.
std::string graph_optimization_level_names();

// Concrete input shapes to prepare a session for (input name -> shape without dynamic dims).
using SessionBucket = std::map<std::string, Shape>;

// ONNX Runtime session options. Unset: ONNX Runtime's defaults (level all, memory pattern and CPU arena on).
struct OnnxOptions {
  std::optional<GraphOptimizationLevel> graph_optimization;
  std::optional<bool> memory_pattern;
  std::optional<bool> cpu_arena;
  std::vector<SessionBucket> session_buckets;  // extra sessions specialised for these shapes
  // The largest size of each named dynamic dimension ("seq": 1024). A request beyond it is refused at
  // admission (ModelMetadata::max_input_bytes/max_output_bytes are computed at these sizes).
  std::map<std::string, int64_t> bucket_max_dims;
  // Shape buckets for dynamic dims (gantry/backend/onnx/shape_buckets.h): a padded dim is rounded up to a
  // multiple of this; each bucket gets a session of its own. Unset: no buckets.
  std::optional<int64_t> bucket_dim_granularity;
  // Tensor name -> the dims it is padded (input) or trimmed (output) along: the manifest's io bucket_dims,
  // put here by backend::provider_request.
  std::map<std::string, std::vector<std::string>> bucket_dims;

  bool empty() const { return *this == OnnxOptions{}; }
  bool operator==(const OnnxOptions&) const = default;
};

// llama.cpp context, offload and generation options. Unset: the defaults documented in
// gantry/backend/llama/settings.h (which also says how the planner chooses n_gpu_layers).
struct LlamaOptions {
  std::optional<int> n_ctx;         // 0..2^24 KV cells in all; 0 = the model's training context
  std::optional<int> parallel;      // 1..256 sequences decoded together
  std::optional<int> n_batch;       // 1..2^20 most tokens in one decode (>= parallel)
  std::optional<int> n_ubatch;      // 1..2^20 physical micro-batch
  std::optional<int> n_gpu_layers;  // -1..65536 layers offloaded to GPUs; -1 = all
  std::vector<float> tensor_split;  // share of offloaded layers per GPU (each >= 0); empty = llama's default
  std::optional<KvType> kv_type;    // K and V cache type
  std::optional<bool> flash_attn;   // unset = auto
  std::optional<bool> mmap;         // false: read the weights into memory instead of mapping the file
  std::optional<int> max_tokens;    // 1..2^24 tokens a plain infer call generates
  // A Jinja chat template file used instead of the GGUF's own (in a manifest: relative to the package).
  std::optional<std::string> chat_template_file;
  // How a thinking model's reasoning comes back: "auto" (= "deepseek": in reasoning_content), "none"
  // (left in the content). llama-server's --reasoning-format spellings.
  std::optional<std::string> reasoning_format;
  // The embeddings' pooling instead of the GGUF's: none, mean, cls, last or rank (llama-server's --pooling).
  std::optional<std::string> pooling;
  // Whether a template that knows thinking is asked to think: on, auto (both: as the request says) or off
  // (never; llama-server's --reasoning).
  std::optional<std::string> reasoning;
  // Speculative decoding (gantry/backend/llama/speculative.h), llama-server's options and defaults: a
  // draft model with the target's vocabulary (in a manifest: relative to the package), the most and
  // fewest tokens it drafts per step and the least probability a drafted token needs; draft-free
  // types (llama-server's --spec-type names, comma-separated: ngram-simple, ngram-map-k,
  // ngram-map-k4v, ngram-mod, ngram-cache, or none) and their n-gram and m-gram sizes.
  std::optional<std::string> draft_model;
  std::optional<int> draft_max;      // 0..1024 (3)
  std::optional<int> draft_min;      // 0..1024 (0)
  std::optional<float> draft_p_min;  // 0..1 (0)
  std::optional<std::string> spec_type;
  std::optional<int> spec_ngram_size_n;  // 1..1024 (12)
  std::optional<int> spec_ngram_size_m;  // 1..1024 (48)
  // One KV pool for all sequences (true) or a stream of n_ctx / parallel cells each (false).
  std::optional<bool> kv_unified;
  std::optional<bool> cache_prompt;  // the slot prompt cache (false: every prompt evaluated whole)
  std::optional<int> cache_ram;  // -1..2^24 MiB of host prompt cache; 0 = off, -1 = only the budget limits it
  std::optional<int> prefill_chunk;  // 1..2^20 prompt tokens a decode step takes next to generating sequences
  // RPC servers ("host:port", `gantry rpc-server` or llama.cpp's rpc-server) whose devices take layers of the
  // model next to the local ones (gantry/backend/llama/settings.h says how they are split).
  std::vector<std::string> rpc;

  bool empty() const { return *this == LlamaOptions{}; }
  bool operator==(const LlamaOptions&) const = default;
};

// The option names, in the order above.
std::span<const std::string_view> llama_option_keys();

// Sets one option from its text form ("n_ctx" "4096", "kv_type" "q8_0", "flash_attn" "auto|on|off",
// "mmap", "kv_unified", "cache_prompt" "on|off|true|false", "tensor_split" "3,1", "cache_ram" MiB,
// "draft_p_min" "0.5", "spec_type" "ngram-simple", "rpc" "10.0.0.2:50052,10.0.0.3:50052"). InvalidArgument
// names the key, the value and what is accepted (an unknown key lists the known ones).
Status set_llama_option(LlamaOptions& options, std::string_view key, std::string_view value);

// Options from key -> text pairs (each through set_llama_option), then validate_llama_options.
Result<LlamaOptions> parse_llama_options(const std::map<std::string, std::string>& texts);

// The set options as key -> text form (what set_llama_option reads back), for logs and messages.
std::map<std::string, std::string> llama_option_texts(const LlamaOptions& options);

// Checks ranges (fields set in code skip set_llama_option) and combinations: n_batch >= parallel, n_ctx (when
// given, not 0) >= parallel, a quantised V cache needs flash attention (not flash_attn off), and
// draft_min <= draft_max.
Status validate_llama_options(const LlamaOptions& options);

// `over`'s set fields replace `base`'s (CLI flags over a manifest).
void overlay(LlamaOptions& base, const LlamaOptions& over);

}  // namespace gantry::model
