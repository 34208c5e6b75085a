#include "gantry/core/kv_type.h"

#include <fmt/format.h>

#include <array>

namespace gantry {
namespace {

struct KvTypeInfo {
  KvType type;
  std::string_view name;
  uint32_t block_size;
  uint32_t type_size;
};

// Block sizes and bytes per block as in ggml's type_traits.
constexpr std::array kKvTypes = {
    KvTypeInfo{KvType::kF32, "f32", 1, 4},         KvTypeInfo{KvType::kF16, "f16", 1, 2},
    KvTypeInfo{KvType::kBF16, "bf16", 1, 2},       KvTypeInfo{KvType::kQ8_0, "q8_0", 32, 34},
    KvTypeInfo{KvType::kQ4_0, "q4_0", 32, 18},     KvTypeInfo{KvType::kQ4_1, "q4_1", 32, 20},
    KvTypeInfo{KvType::kQ5_0, "q5_0", 32, 22},     KvTypeInfo{KvType::kQ5_1, "q5_1", 32, 24},
    KvTypeInfo{KvType::kIQ4_NL, "iq4_nl", 32, 18},
};

const KvTypeInfo& info(KvType t) {
  for (const auto& i : kKvTypes) {
    if (i.type == t) return i;
  }
  return kKvTypes[1];
}

}  // namespace

std::string_view kv_type_name(KvType t) { return info(t).name; }

std::optional<KvType> parse_kv_type(std::string_view name) {
  for (const auto& i : kKvTypes) {
    if (i.name == name) return i.type;
  }
  return std::nullopt;
}

std::string_view kv_type_names() { return "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl"; }

bool kv_type_quantized(KvType t) { return info(t).block_size > 1; }

Result<uint64_t> kv_row_bytes(KvType t, uint64_t n) {
  const KvTypeInfo& i = info(t);
  if (n % i.block_size != 0) {
    return InvalidArgument(
        fmt::format("KV cache type {} needs rows that are a multiple of {} elements (llama.cpp quantises "
                    "each attention head's row), this model's rows have {}; use f16",
                    i.name, i.block_size, n));
  }
  return n / i.block_size * i.type_size;
}

}  // namespace gantry
