// The hyperparameters llama.cpp reads from a GGUF model, validated in one place before any llama.cpp call.
//
// llama.cpp trusts its files: a block_count of 0 or 2^32-1, head_count_kv 0 (it divides by it), a NaN norm
// epsilon or an unknown rope scaling type end in GGML_ASSERT (SIGABRT) or SIGFPE, not an error. Everything
// that reads a GGUF model for llama.cpp (the planner's profile, the backend's load, hence plan, run, bench
// and serve) goes through read_hyperparameters() first, so such a file is refused with an error that names
// the file and the key.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/model/gguf.h"

namespace gantry::model {

// llama.cpp's limits (llama-hparams.h).
inline constexpr uint32_t kGgufMaxLayers = 512;    // LLAMA_MAX_LAYERS
inline constexpr uint32_t kGgufMaxExperts = 1024;  // LLAMA_MAX_EXPERTS
// Gantry's sanity bounds: far above any published model, low enough that products stay in 64 bits.
inline constexpr uint32_t kGgufMaxEmbedding = 1u << 20;
inline constexpr uint32_t kGgufMaxHeads = 1u << 14;
inline constexpr uint32_t kGgufMaxHeadWidth = 1u << 16;
inline constexpr uint32_t kGgufMaxFeedForward = 1u << 24;

struct GgufHyperparameters {
  std::string architecture;
  uint32_t n_layer = 0;
  uint32_t n_embd = 0;
  uint32_t n_ctx_train = 0;
  uint32_t n_swa = 0;    // sliding window (0: none)
  uint32_t n_vocab = 0;  // tokenizer tokens, else vocab_size, else token_embd's rows (0: unknown)
  uint32_t n_expert = 0;
  uint32_t n_expert_used = 0;  // the largest per-layer expert_used_count (0 without experts)
  // One entry per layer (scalar keys are repeated).
  std::vector<uint32_t> n_head, n_head_kv, n_embd_head_k, n_embd_head_v, n_ff;
};

// Reads and checks every hyperparameter llama.cpp would assert on: block count (1..512), embedding length,
// training context, per-layer head counts (kv heads non-zero and dividing the heads), key/value widths,
// feed-forward lengths, expert counts, norm epsilons (finite, positive), rope scaling type and factors,
// vocabulary size against token_embd/output, and the attention/embedding tensor shapes against all of these.
// InvalidArgument naming the file, the key and the value otherwise.
Result<GgufHyperparameters> read_hyperparameters(const GgufFile& file);

// The layer a tensor name belongs to ("blk.3.attn_q.weight" -> 3), or nullopt for a tensor outside the
// repeating blocks. read_hyperparameters refuses a tensor whose layer is not below block_count.
std::optional<uint32_t> gguf_tensor_layer(std::string_view name);

}  // namespace gantry::model
