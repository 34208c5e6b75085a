// `gantry plan --params 70B`: a model known only by its parameter count, planned as a bf16 llama-architecture
// checkpoint of that size (grouped-query attention, SwiGLU feed-forward). An ESTIMATE, and it says so: the
// CheckpointRead it makes carries its assumptions, in words.
//
// The shape is the nearest (by log of the parameter count) of the published Llama-family models: Llama 3.2 1B
// and 3B, Llama 3.1 8B, Llama 2 13B, Qwen2.5 32B (llama layout), Llama 3.1 70B and 405B. Its layer count is
// kept when the count is within 5 % of that model's and no other field is given ("70B" is Llama 3.1
// 70B's 70.6B: 80 layers, "as published"), else scaled to the parameter count (1 to 512 layers). Any field
// given replaces the assumed one; KV heads default to the heads when the given heads are fewer than the
// shape's KV heads.
#pragma once

#include <cstdint>
#include <string>

#include "gantry/core/status.h"
#include "gantry/plan/checkpoint_source.h"

namespace gantry::plan {

struct ParamsSpec {
  std::string params;  // "70B", "7.6b", "500M", "8e9"
  // 0: the shape's (layers: see above).
  uint32_t layers = 0, heads = 0, kv_heads = 0, embd = 0, ff = 0, vocab = 0, ctx_train = 0;
};

// "70B" -> 70e9 (suffix K, M, B or G, T, any case; or a plain number, "8e9"). InvalidArgument naming
// --params for anything else or a count outside 1M..100T.
Result<uint64_t> parse_param_count(const std::string& text);

// The checkpoint such a model would be: config.json and bf16 tensors under the Hugging Face names (nothing
// read: bytes_read 0, files 0), label = spec.params. InvalidArgument for a bad count, or heads that do not
// divide the embedding (or KV heads that do not divide the heads).
Result<CheckpointRead> params_checkpoint(const ParamsSpec& spec);

}  // namespace gantry::plan
