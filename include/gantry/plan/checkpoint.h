// A Hugging Face checkpoint planned before a byte of its weights is read: config.json and the safetensors
// headers (tensor names, dtypes, shapes) become the GGUF that llama.cpp's converter (convert_hf_to_gguf.py at
// commit de3ff815) would write, then the file llama_model_quantize would make of it at a given type
// (gantry/plan/quantiser.h), then the same ModelProfile the GGUF planner reads from a file
// (profile_from_tensors), so the rest of the planner is shared.
//
// The conversion mirrors the converter per architecture: gguf-py's tensor names (tensor_mapping.py), GGML
// dimension order (the header's shape reversed), experts stacked into one 3-D tensor per projection,
// norms / 1-D tensors / biases / expert routers kept in f32, other matrices in the type `--outtype auto`
// picks (bf16 for a bf16 checkpoint, else f16), Llama 3's rope_freqs tensor, and the hyperparameters
// llama.cpp reads (heads, KV heads, head width, feed-forward, experts, sliding window, training context).
// Planned: llama, mistral, mixtral (LlamaForCausalLM, MistralForCausalLM, MixtralForCausalLM), qwen2,
// qwen2moe, qwen3, qwen3moe, gemma, gemma2, gemma3 (text). Anything else is Unsupported("not planned yet:
// architecture X"); the caller can still report the weights alone (checkpoint_weight_bytes).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/dtype.h"
#include "gantry/core/status.h"
#include "gantry/model/gguf.h"
#include "gantry/model/gguf_hparams.h"
#include "gantry/plan/model_profile.h"
#include "gantry/plan/quantiser.h"

namespace gantry::plan {

// One tensor of a checkpoint as its safetensors header states it.
struct CheckpointTensor {
  std::string name;  // "model.layers.0.self_attn.q_proj.weight"
  DType dtype = DType::kBFloat16;
  std::vector<uint64_t> shape;  // as in the header: outermost first ([out_features, in_features])
  uint64_t bytes = 0;
};

// The GGUF the converter would write.
struct ConvertedCheckpoint {
  std::string hf_architecture;                 // config.json "architectures"[0]: "Qwen2ForCausalLM"
  model::GgufHyperparameters hparams;          // architecture is llama.cpp's name: "qwen2"
  std::vector<bool> sliding_window;            // per layer
  std::vector<model::GgufTensorInfo> tensors;  // GGUF names, GGML dims, the converter's types
  FileType converted_type;                     // what `--outtype auto` writes: bf16 or f16
  uint64_t checkpoint_bytes = 0;               // the safetensors tensors, as stored
  std::vector<std::string> notes;              // where the result is less than exact, and why
};

// Converts; `config_json` is config.json verbatim. Errors: InvalidArgument naming a missing or bad
// config.json field or a tensor whose shape contradicts it; Unsupported("not planned yet: architecture X
// (...)") for an architecture not listed above, or a tensor this conversion cannot name.
Result<ConvertedCheckpoint> convert_checkpoint(std::string_view config_json,
                                               const std::vector<CheckpointTensor>& tensors);

// The profile of the GGUF llama_model_quantize writes from the converted file at `type` (the converted type
// itself: the converted file). `name` labels it.
Result<ModelProfile> profile_checkpoint(const ConvertedCheckpoint& converted, const FileType& type,
                                        std::string name);

// The tensors of that GGUF (llama.cpp's order, types, sizes, offsets): what profile_checkpoint sums.
std::vector<model::GgufTensorInfo> checkpoint_gguf_tensors(const ConvertedCheckpoint& converted,
                                                           const FileType& type);

// For an architecture not planned: the weights alone at `type`, every matrix at the type's nominal bits per
// weight and the rest as stored (an estimate; no KV cache or buffers).
uint64_t checkpoint_weight_bytes(const std::vector<CheckpointTensor>& tensors, const FileType& type);

// The architecture names (config.json "architectures") this conversion knows, for messages.
std::string planned_architectures();

}  // namespace gantry::plan
