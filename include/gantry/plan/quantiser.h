// llama.cpp's quantiser as plain data: the ggml type llama_model_quantize (src/llama-quant.cpp at commit
// de3ff815) gives every tensor of a model at a file type such as "q4_k_m", and where it puts it in the file,
// without reading a weight. The K-quant mixtures follow llama_tensor_get_type: the output (or tied token
// embedding) in q6_K, attn_v and ffn_down with more bits in the first, last and every third layer
// (use_more_bits), 70B-class and 8-expert exceptions, and the fallbacks for rows that are not a multiple of
// the block size (q4_K -> q5_0, q6_K -> q8_0, ..., f16 when nothing fits). No importance matrix, no
// --tensor-type overrides, output tensor quantised (llama-quantize's defaults).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/model/gguf.h"

namespace gantry::plan {

// A file type llama-quantize writes (its name, llama_ftype, and the default tensor type).
struct FileType {
  std::string_view name;  // "q4_k_m", as llama-quantize spells it in lower case
  uint32_t llama_ftype;   // LLAMA_FTYPE_MOSTLY_Q4_K_M == 15
  model::GgmlType default_type;
};

// The file types planned, largest first (f32, bf16, f16, q8_0, q6_k, q5_k_m, ..., q2_k). Types that need an
// importance matrix (iq1/iq2/iq3) are not among them.
const std::vector<FileType>& file_types();
// By name, case-insensitive ("Q4_K_M" == "q4_k_m"); nullopt when unknown.
std::optional<FileType> file_type_by_name(std::string_view name);
// "f32, bf16, f16, q8_0, ...": for messages.
std::string file_type_names();

// What the quantiser reads from the model's hyperparameters.
struct QuantModel {
  std::string architecture;  // llama.cpp's name: "llama", "qwen2", ...
  uint32_t n_layer = 0;
  uint32_t n_head = 0;     // layer 0
  uint32_t n_head_kv = 0;  // layer 0
  uint32_t n_expert = 0;
};

// The tensors of the GGUF that llama_model_quantize writes at `type` from a file holding `tensors` (names,
// dims, types as the source file has them; any order): llama.cpp's order (tensors outside the blocks by
// name, then blk.0, blk.1, ... each by name), each with its new type, size and offset (relative to the data
// section, aligned to `alignment`) and without trailing dimensions of 1 (as gguf_add_tensor writes them).
std::vector<model::GgufTensorInfo> quantised_tensors(const QuantModel& model, const FileType& type,
                                                     std::vector<model::GgufTensorInfo> tensors,
                                                     uint32_t alignment = 32);

// Bytes of a tensor with `dims` (ggml order) at `type`: rows x the bytes of one row. dims[0] must be a
// multiple of the type's block size.
uint64_t ggml_tensor_bytes(const model::GgmlTypeTraits& type, const std::vector<uint64_t>& dims);

}  // namespace gantry::plan
