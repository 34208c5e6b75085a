// ggml tensor types as GGUF files store them: numeric ids, names, block sizes and bytes per block.
// The table mirrors ggml's type_traits at llama.cpp commit de3ff815 (removed ids 4, 5, 31-33, 36-38 are
// unknown).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace gantry::model {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
  kNVFP4 = 40,
  kQ1_0 = 41,
  kQ2_0 = 42,
};

struct GgmlTypeTraits {
  GgmlType type;
  std::string_view name;  // ggml's spelling: "f32", "q4_0", "q6_K", "iq2_xxs", ...
  uint32_t block_size;    // elements per block (1 for plain types)
  uint32_t type_size;     // bytes per block
};

// The traits of a type id read from a file, or nullopt for an id this build does not know.
std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t id);

// Looks a type up by ggml's name (case-insensitive: "Q8_0" and "q8_0" both work).
std::optional<GgmlTypeTraits> ggml_type_by_name(std::string_view name);

// Bytes that `n_elements` of `type` occupy (n_elements must be a multiple of the block size).
uint64_t ggml_row_bytes(const GgmlTypeTraits& type, uint64_t n_elements);

}  // namespace gantry::model
