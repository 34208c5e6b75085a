#include "gantry/core/dtype.h"

#include <array>

#include "gantry/core/enum_names.h"

namespace gantry {
namespace {

// Short names first (canonical), then the long ONNX/numpy spellings as aliases.
constexpr auto kNames = enum_names<DType>("dtype", {
                                                       {DType::kFloat32, "f32"},
                                                       {DType::kFloat16, "f16"},
                                                       {DType::kBFloat16, "bf16"},
                                                       {DType::kFloat64, "f64"},
                                                       {DType::kInt8, "i8"},
                                                       {DType::kInt16, "i16"},
                                                       {DType::kInt32, "i32"},
                                                       {DType::kInt64, "i64"},
                                                       {DType::kUInt8, "u8"},
                                                       {DType::kUInt16, "u16"},
                                                       {DType::kUInt32, "u32"},
                                                       {DType::kUInt64, "u64"},
                                                       {DType::kBool, "bool"},
                                                       {DType::kString, "string"},
                                                       {DType::kFloat32, "float32"},
                                                       {DType::kFloat32, "float"},
                                                       {DType::kFloat16, "float16"},
                                                       {DType::kFloat16, "half"},
                                                       {DType::kBFloat16, "bfloat16"},
                                                       {DType::kFloat64, "float64"},
                                                       {DType::kFloat64, "double"},
                                                       {DType::kInt8, "int8"},
                                                       {DType::kInt16, "int16"},
                                                       {DType::kInt32, "int32"},
                                                       {DType::kInt64, "int64"},
                                                       {DType::kUInt8, "uint8"},
                                                       {DType::kUInt16, "uint16"},
                                                       {DType::kUInt32, "uint32"},
                                                       {DType::kUInt64, "uint64"},
                                                       {DType::kString, "str"},
                                                       {DType::kFloat8E4M3, "f8e4m3"},
                                                       {DType::kFloat8E5M2, "f8e5m2"},
                                                       {DType::kFloat8E4M3, "float8e4m3fn"},
                                                       {DType::kFloat8E5M2, "float8e5m2"},
                                                   });

struct DTypeSize {
  DType type;
  size_t size;
};

constexpr std::array<DTypeSize, 16> kSizes = {{
    {DType::kFloat32, 4},
    {DType::kFloat16, 2},
    {DType::kBFloat16, 2},
    {DType::kFloat64, 8},
    {DType::kInt8, 1},
    {DType::kInt16, 2},
    {DType::kInt32, 4},
    {DType::kInt64, 8},
    {DType::kUInt8, 1},
    {DType::kUInt16, 2},
    {DType::kUInt32, 4},
    {DType::kUInt64, 8},
    {DType::kBool, 1},
    {DType::kFloat8E4M3, 1},
    {DType::kFloat8E5M2, 1},
    {DType::kString, 0},
}};

}  // namespace

std::string_view dtype_name(DType t) { return kNames.name_of(t); }

std::optional<DType> parse_dtype(std::string_view name) { return kNames.find(name); }

size_t dtype_size(DType t) {
  for (const auto& i : kSizes)
    if (i.type == t) return i.size;
  return 0;
}

}  // namespace gantry
