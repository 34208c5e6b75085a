// KV cache element types: the one vocabulary the planner, the llama.cpp backend and the CLI share.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "gantry/core/status.h"

namespace gantry {

// KV cache element types llama.cpp accepts for --cache-type-k/v.
enum class KvType { kF32, kF16, kBF16, kQ8_0, kQ4_0, kQ4_1, kQ5_0, kQ5_1, kIQ4_NL };

// "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl".
std::string_view kv_type_name(KvType t);
std::optional<KvType> parse_kv_type(std::string_view name);
// Every name above, comma-separated, for messages that list the accepted types.
std::string_view kv_type_names();
// Whether the type is block-quantised (a quantised V cache needs flash attention in llama.cpp).
bool kv_type_quantized(KvType t);
// Bytes for `n` elements (n must be a multiple of the type's block size).
Result<uint64_t> kv_row_bytes(KvType t, uint64_t n);

}  // namespace gantry
