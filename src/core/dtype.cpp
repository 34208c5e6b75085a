#include "gantry/core/dtype.h"

#include <array>
#include <utility>

namespace gantry {
namespace {

struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
};

constexpr std::array<DTypeInfo, 14> kInfos = {{
    {DType::kFloat32, "f32", 4}, {DType::kFloat16, "f16", 2}, {DType::kBFloat16, "bf16", 2},
    {DType::kFloat64, "f64", 8}, {DType::kInt8, "i8", 1},     {DType::kInt16, "i16", 2},
    {DType::kInt32, "i32", 4},   {DType::kInt64, "i64", 8},   {DType::kUInt8, "u8", 1},
    {DType::kUInt16, "u16", 2},  {DType::kUInt32, "u32", 4},  {DType::kUInt64, "u64", 8},
    {DType::kBool, "bool", 1},   {DType::kString, "string", 0},
}};

constexpr std::array<std::pair<std::string_view, DType>, 16> kAliases = {{
    {"float32", DType::kFloat32}, {"float", DType::kFloat32},   {"float16", DType::kFloat16},
    {"half", DType::kFloat16},    {"bfloat16", DType::kBFloat16}, {"float64", DType::kFloat64},
    {"double", DType::kFloat64},  {"int8", DType::kInt8},       {"int16", DType::kInt16},
    {"int32", DType::kInt32},     {"int64", DType::kInt64},     {"uint8", DType::kUInt8},
    {"uint16", DType::kUInt16},   {"uint32", DType::kUInt32},   {"uint64", DType::kUInt64},
    {"str", DType::kString},
}};

}  // namespace

std::string_view dtype_name(DType t) {
  for (const auto& i : kInfos)
    if (i.type == t) return i.name;
  return "unknown";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& i : kInfos)
    if (i.name == name) return i.type;
  for (const auto& [alias, t] : kAliases)
    if (alias == name) return t;
  return std::nullopt;
}

size_t dtype_size(DType t) {
  for (const auto& i : kInfos)
    if (i.type == t) return i.size;
  return 0;
}

}  // namespace gantry
