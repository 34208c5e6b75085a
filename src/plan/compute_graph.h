// The prompt graph llama.cpp reserves its compute buffer for (llama_context::sched_reserve: n_ubatch tokens,
// every one an output), rebuilt node by node for the architectures whose graph builders (src/models/*.cpp,
// llama-graph.cpp at commit de3ff815) it mirrors, and sized by replaying ggml's allocator on it
// (plan/graph_alloc.h). Internal to the planner.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gantry/plan/model_profile.h"

namespace gantry::plan {

struct GraphShape {
  uint32_t n_tokens = 0;   // the ubatch reserved
  uint32_t n_outputs = 0;  // rows of logits
  uint32_t n_kv = 0;       // KV cells per stream, full-attention layers
  uint32_t n_kv_swa = 0;   // per stream, sliding-window layers
  uint32_t n_stream = 1;
  bool flash_attn = true;
  bool kv_quantised = false;  // a quantised cache rotates q/k (and v) by Hadamard matrices (attn_rot_k/v)
};

// The CPU compute buffer for `model` with every layer and the output layer on one device, or nullopt for
// a graph not modelled here (another architecture, several KV streams): the caller
// keeps its estimate. `trace` receives the allocator's decisions.
std::optional<uint64_t> simulated_compute_bytes(const ModelProfile& model, const GraphShape& shape,
                                                std::vector<std::string>* trace = nullptr);

}  // namespace gantry::plan
