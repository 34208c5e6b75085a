// LlamaContext: one llama_context (KV cache, compute buffers, threads) over shared LlamaWeights.
// Not thread-safe: one thread drives it (the BatchEngine's decode loop, a benchmark, an embedder).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "gantry/backend/llama/options.h"
#include "gantry/backend/llama/weights.h"
#include "gantry/core/status.h"

struct llama_context;
struct llama_batch;

namespace gantry::llama {

class LlamaContext {
 public:
  // Validates the options (threads, sizes, n_seq_max <= llama_max_parallel_sequences) and creates the
  // context. Errors: InvalidArgument for bad options, ResourceExhausted when llama.cpp cannot allocate.
  static Result<std::unique_ptr<LlamaContext>> create(std::shared_ptr<const LlamaWeights> weights,
                                                      const ContextOptions& options);
  ~LlamaContext();
  LlamaContext(const LlamaContext&) = delete;
  LlamaContext& operator=(const LlamaContext&) = delete;

  llama_context* raw() const { return ctx_; }
  const LlamaWeights& weights() const { return *weights_; }
  const std::shared_ptr<const LlamaWeights>& shared_weights() const { return weights_; }
  const ContextOptions& options() const { return options_; }  // with 0-valued fields resolved

  uint32_t n_ctx() const;      // actual cells (llama.cpp pads the request to a multiple of 256)
  uint32_t n_ctx_seq() const;  // cells one sequence may use
  uint32_t n_batch() const;
  uint32_t n_seq_max() const;

  // llama_decode, its return codes as a Status: 1 -> ResourceExhausted (no KV slot; the cache is
  // unchanged), 2 -> Cancelled (abort callback), -1 -> InvalidArgument, other -> Internal.
  Status decode(const llama_batch& batch);

  // While set, llama.cpp asks `check` between graph nodes and stops the decode when it returns true.
  // Without a check no callback is installed at all (llama.cpp then skips the per-node call).
  void set_abort_check(std::function<bool()> check);

  // Runs this context's graphs on `owner`'s threadpool(s) (when it has them), which must outlive it and
  // never run at the same time: a draft model's context next to its target's (one decoding thread).
  void share_threads(const LlamaContext& owner);

  // Frees every KV cell of `seq` (all positions).
  void remove_sequence(int32_t seq);
  // Gives `dst` (holding nothing) everything `src` holds, so both continue from the same cache. In
  // a unified cache the cells are shared (no copy, no new cells); with a stream per sequence the
  // stream is copied on the next decode.
  void copy_sequence(int32_t src, int32_t dst);
  // Largest position `seq` holds in the KV cache, -1 when it holds none.
  int32_t sequence_pos_max(int32_t seq) const;
  void clear();

 private:
  LlamaContext() = default;
  static bool abort_trampoline(void* self);

  std::shared_ptr<const LlamaWeights> weights_;
  ContextOptions options_;
  llama_context* ctx_ = nullptr;
  std::function<bool()> abort_check_;
  void* threadpool_ = nullptr;        // ggml_threadpool_t
  void* threadpool_batch_ = nullptr;  // separate pool when n_threads_batch != n_threads
};

}  // namespace gantry::llama
