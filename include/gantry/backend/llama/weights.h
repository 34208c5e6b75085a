// LlamaWeights: a GGUF model loaded by llama.cpp (weights mmapped, placed as the planner said), with its
// vocabulary: tokenize, detokenize. Immutable once loaded; share it between contexts.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/backend/generation.h"
#include "gantry/backend/llama/options.h"
#include "gantry/backend/llama/remote_devices.h"
#include "gantry/core/status.h"

struct llama_model;
struct llama_vocab;

namespace gantry::llama {

// What a quick look at a GGUF file's header, metadata and tensor table says.
struct GgufSummary {
  uint32_t version = 0;
  std::string architecture;  // general.architecture
  int64_t n_tensors = 0;
  uint64_t file_bytes = 0;
  uint64_t data_end = 0;  // where the last tensor's bytes end; <= file_bytes for a whole file
  // A tensor is of a type ggml's CPU backend may repack into its own layout (Q4_0, Q8_0, IQ4_NL, K-quants,
  // ...).
  bool repackable_types = false;
};

// Checks that `path` is a readable, complete GGUF file before llama.cpp sees it: magic, version,
// metadata and tensor infos parse, and every tensor's bytes lie inside the file. Errors: NotFound,
// Corrupt ("truncated: ..." when the file is shorter than its tensor table says).
Result<GgufSummary> check_gguf_file(const std::string& path);

class LlamaWeights {
 public:
  // check_gguf_file, then llama_model_load_from_file with mmap and the given placement. Errors say
  // which file and why (Corrupt, Unsupported architecture, ...), with llama.cpp's own reason. With RPC
  // servers in the placement, a server that is down, busy, of another protocol version or lost while
  // loading is an error naming it, and nothing stays loaded.
  static Result<std::shared_ptr<LlamaWeights>> load(const std::string& path, const LoadOptions& options = {});

  ~LlamaWeights();
  LlamaWeights(const LlamaWeights&) = delete;
  LlamaWeights& operator=(const LlamaWeights&) = delete;

  llama_model* raw() const { return model_; }
  const llama_vocab* vocab() const { return vocab_; }
  const std::string& path() const { return path_; }
  const std::string& architecture() const { return arch_; }
  std::string description() const;  // llama_model_desc, e.g. "llama ?B F16"

  int32_t n_vocab() const;
  int32_t n_ctx_train() const;
  int32_t n_embd() const;
  int32_t n_layer() const;
  uint64_t size_bytes() const;  // all tensors
  uint64_t n_params() const;

  Result<std::vector<int32_t>> tokenize(std::string_view text, bool add_special = true,
                                        bool parse_special = true) const;
  // The bytes of one token (may be part of a UTF-8 character).
  std::string token_to_piece(int32_t token, bool render_special = true) const;
  Result<std::string> detokenize(std::span<const int32_t> tokens, bool render_special = true) const;
  bool is_eog(int32_t token) const;
  bool token_valid(int32_t token) const { return token >= 0 && token < n_vocab(); }
  // The most bytes of text one token stands for (its longest piece, special tokens rendered), so a text
  // of n bytes is at least n / max_token_bytes() tokens: a text too long for a context is refused before
  // tokenizing megabytes of it. 0 when the tokenizer may drop bytes (UGM and WPM normalise whitespace):
  // then no byte count bounds the tokens.
  size_t max_token_bytes() const { return max_token_bytes_; }

  // The RPC servers' devices the model was loaded onto (empty without placement.rpc_servers).
  const RemoteDevices& remote() const { return remote_; }
  // Ok while every RPC server holding part of the model is still there; Unavailable naming the one lost.
  Status remote_health() const { return remote_.empty() ? Status::Ok() : remote_.check(); }

 private:
  LlamaWeights() = default;
  llama_model* model_ = nullptr;
  const llama_vocab* vocab_ = nullptr;
  std::string path_;
  std::string arch_;
  RemoteDevices remote_;
  size_t max_token_bytes_ = 0;
};

// backend::context_length_exceeded when a text of `text_bytes` bytes is more than `n_tokens` tokens of
// `w` can stand for (max_token_bytes()), without tokenizing it; Ok when it may fit (or no byte count
// bounds the tokens).
Status check_text_fits(const LlamaWeights& w, size_t text_bytes, size_t n_tokens);

}  // namespace gantry::llama
