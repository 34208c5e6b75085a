// The planner's view of a model: what it needs to know about weights and attention, independent of file
// format. Adapters fill it (gantry/runtime/model_profile.h reads a GGUF file); tests build it by hand.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gantry::plan {

struct LayerProfile {
  uint64_t weight_bytes = 0;
  uint32_t n_head = 0;
  uint32_t n_head_kv = 0;      // < n_head with grouped-query attention; 0 for a layer without KV cache
  uint32_t n_embd_head_k = 0;  // K width per head
  uint32_t n_embd_head_v = 0;  // V width per head
  uint32_t n_ff = 0;
  bool sliding_window = false;  // a sliding-window attention (SWA) layer
};

struct ModelProfile {
  std::string name;
  std::string architecture;
  uint64_t file_bytes = 0;
  uint64_t n_params = 0;
  std::string weight_type;  // dominant tensor type, e.g. "q8_0"
  std::vector<LayerProfile> layers;
  uint64_t input_weight_bytes = 0;   // token embeddings etc.: llama.cpp always keeps these on the CPU
  uint64_t output_weight_bytes = 0;  // output norm + output projection: the "output layer"
  uint32_t n_embd = 0;
  uint32_t n_vocab = 0;
  uint32_t n_ctx_train = 0;
  uint32_t n_swa = 0;  // sliding window size in tokens (0: no SWA layers)

  uint64_t total_weight_bytes() const;
  uint32_t n_layer() const { return static_cast<uint32_t>(layers.size()); }
};

}  // namespace gantry::plan
