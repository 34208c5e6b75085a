// DType: the element types a tensor can hold, with their names and sizes.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace gantry {

enum class DType {
  kFloat32,
  kFloat16,
  kBFloat16,
  kFloat64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUInt8,
  kUInt16,
  kUInt32,
  kUInt64,
  kBool,
  kFloat8E4M3,  // OCP FP8 E4M3 "fn" (finite, no infinities: ONNX FLOAT8E4M3FN, safetensors F8_E4M3)
  kFloat8E5M2,  // OCP FP8 E5M2 (ONNX FLOAT8E5M2, safetensors F8_E5M2)
  kString,      // variable-length; a tensor of strings stores std::string elements
};

// Lower-case short name: "f32", "f16", "bf16", "f64", "i8".."i64", "u8".."u64", "bool", "f8e4m3", "f8e5m2",
// "string".
std::string_view dtype_name(DType t);

// Parses the short names above and the long ONNX/numpy spellings ("float32", "float", "int64", ...).
std::optional<DType> parse_dtype(std::string_view name);

// Bytes per element; 0 for kString (variable length).
size_t dtype_size(DType t);

}  // namespace gantry
