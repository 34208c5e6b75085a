// Plain-data options for the llama.cpp engine: where a model goes (from the planner) and how a context
// is sized. What a generation asks for (sampling, stop strings, streaming) is backend-generic:
// gantry/backend/generation.h. The KV cache type is the planner's (gantry/core/kv_type.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gantry/core/kv_type.h"

namespace gantry::memory {
class BlockPool;
class Budget;
}  // namespace gantry::memory

namespace gantry::llama {

// Where the weights go. The planner decides; the engine only applies it.
struct LlamaPlacement {
  int n_gpu_layers = 0;  // layers offloaded to GPUs; -1 = all; 0 = CPU only
  std::vector<float>
      tensor_split;  // share of the offloaded layers per GPU (proportions); empty = llama's default
  int main_gpu = 0;  // GPU holding the whole model when split_mode is kNone
  enum class SplitMode { kNone, kLayer, kRow } split_mode = SplitMode::kLayer;
  // RPC servers ("host:port"). With any, the offload devices are given to llama.cpp explicitly: the servers'
  // devices first (in this order), then the local GPUs (as llama-server orders them: the output layer, and
  // its logits, stay on this host); tensor_split counts over that list.
  std::vector<std::string> rpc_servers;
};

struct LoadOptions {
  LlamaPlacement placement;
  bool use_mmap = true;
  bool check_tensors = false;  // let llama.cpp validate tensor data while loading (slow)
  // llama.cpp's no_alloc: read the metadata and simulate every allocation (sizes exact, no tensor
  // data, mmap off). A context created over such weights is a dry run too: it reports its memory
  // (llama_get_memory_breakdown) but cannot decode.
  bool dry_run = false;
  // Only the vocabulary and metadata (no tensors): enough to tokenize and to render a chat template.
  bool vocab_only = false;
  // The runtime's CPU pool: CPU weights are allocated from it (charged to the model's ledger) where that is
  // no slower than llama.cpp's own allocation — weights read into memory (mmap off), no layer offloaded, and
  // no tensor of a type ggml's CPU backend repacks (an override would lose the repacked layout). Else unused.
  memory::BlockPool* cpu_pool = nullptr;
};

enum class FlashAttn { kAuto, kOn, kOff };

// How embeddings of one sequence are pooled. kRank: a reranker's classifier head over the pooled token
// (one score per sequence; llama.cpp's LLAMA_POOLING_TYPE_RANK).
enum class Pooling { kModel, kNone, kMean, kCls, kLast, kRank };

struct ContextOptions {
  uint32_t n_ctx = 2048;         // KV cells in all (shared by the sequences when kv_unified)
  uint32_t n_batch = 512;        // most tokens in one llama_decode
  uint32_t n_ubatch = 512;       // physical micro-batch
  uint32_t n_seq_max = 1;        // parallel sequences (slots)
  int n_threads = 0;             // threads for single-token steps; 0 = hardware concurrency
  int n_threads_batch = 0;       // threads for prompt batches; 0 = n_threads
  KvType type_k = KvType::kF16;  // any of the nine llama.cpp accepts
  KvType type_v = KvType::kF16;
  FlashAttn flash_attn = FlashAttn::kAuto;
  // true: the sequences draw on one pool of n_ctx cells (a sequence may use all of it); false: each has
  // a stream of n_ctx / n_seq_max cells of its own (attention reads only its own cells). Models
  // loaded through llama_settings() get the kv_unified option's default instead (settings.h).
  bool kv_unified = true;
  bool embeddings = false;  // extract embeddings instead of logits
  Pooling pooling = Pooling::kModel;
  // Own ggml CPU threadpool(s) whose workers poll briefly between steps (as llama-bench and
  // llama-server do); cheaper single-token steps than starting threads for every graph.
  bool threadpool = true;
  int threadpool_poll = 50;  // 0..100: how long idle workers spin before sleeping
};

// How the BatchEngine schedules and caches (gantry/backend/llama/batch_engine.h), beyond its context.
struct EngineOptions {
  // Slot prompt cache: a request reuses the longest common prefix an idle slot holds. Off: every
  // prompt is evaluated whole (as each request's cache_prompt false).
  bool cache_prompt = true;
  // Host-memory prompt cache (llama-server's --cache-ram): bytes of saved sequence states at most;
  // 0 = off, kUnlimited = only the budget limits it. See host_prompt_cache.h.
  static constexpr uint64_t kUnlimited = ~uint64_t{0};
  uint64_t cache_ram_bytes = 0;
  // Where the host cache's bytes are charged (reserved under `budget_owner`) and from which it is
  // asked to give them back under memory pressure (Budget::add_reclaimer). Null: only the limit.
  memory::Budget* budget = nullptr;
  std::string budget_owner;
  // Prompt tokens one decode step evaluates at most, next to one token of every generating sequence
  // (chunked prefill: a long prompt does not stall the running streams). 0 = n_ubatch.
  uint32_t prefill_chunk = 0;
  // A step that carries generating sequences' tokens spends about this long at most on prompt tokens:
  // its prompt chunk is this time over the measured milliseconds per token of recent steps (at least
  // kMinMixedChunk tokens, at most prefill_chunk). It bounds the gap a long prompt puts between a running
  // stream's tokens where prompt tokens are slow (one CPU thread: 512 of them took 1.2 s). A batch
  // tenant's prompt (a lower priority class, backend::Schedule) is bounded so even with no sequence
  // generating, so that an interactive request arriving meanwhile waits one bounded step, not a whole
  // chunk; any other step with no sequence generating takes the whole prefill_chunk. 0: no time bound
  // (prefill_chunk only).
  double mixed_step_ms = 100;
  static constexpr uint32_t kMinMixedChunk = 16;
  // A step takes prompt tokens of one sequence only (the first waiting, up to prefill_chunk). Where a
  // step's time grows with every token it holds (every layer on the CPU), a request's first token then
  // comes once its own prompt is evaluated, not once every prompt admitted with it is: the same work,
  // earlier first tokens. On a GPU several prompts evaluate together at little extra time: pack them.
  bool one_prompt_per_step = false;
};

}  // namespace gantry::llama
