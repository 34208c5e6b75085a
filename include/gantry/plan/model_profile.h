// The planner's view of a model: what it needs to know about weights and attention, independent of file
// format. Adapters fill it (gantry/plan/gguf_profile.h reads a GGUF file); tests build it by hand.
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
  // Bytes of this layer's matrices that llama.cpp's CPU backend copies into its CPU_REPACK buffer
  // (interleaved q4_0/q4_K/iq4_nl/mxfp4 on AVX2) when the layer runs on the CPU; the mmapped originals stay
  // mapped.
  uint64_t repack_bytes = 0;
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
  uint64_t output_repack_bytes = 0;  // as LayerProfile::repack_bytes, for the output projection
  // With everything on the CPU and mmap, llama.cpp maps the file range spanning the tensors it does not
  // repack: [first offset, last end). 0 when unknown (the planner then sums tensor sizes).
  uint64_t mapped_span_bytes = 0;
  uint32_t n_embd = 0;
  uint32_t n_vocab = 0;
  uint32_t n_ctx_train = 0;
  uint32_t n_swa = 0;  // sliding window size in tokens (0: no SWA layers)
  // Mixture of experts (0 for a dense model): experts per layer, experts used per token, an expert's
  // feed-forward width and the shared expert's (0: none).
  uint32_t n_expert = 0;
  uint32_t n_expert_used = 0;
  uint32_t n_ff_exp = 0;
  uint32_t n_ff_shexp = 0;

  uint64_t total_weight_bytes() const;
  uint32_t n_layer() const { return static_cast<uint32_t>(layers.size()); }
};

}  // namespace gantry::plan
