// DType: the element types a tensor can hold, with their names and sizes, the C++ type each element is
// stored as, and visit_dtype: the one switch over DType that per-type code is written on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

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

// The C++ type one element of `D` is stored as: float, double, intN_t, uintN_t; uint16_t for FP16 and BF16
// and uint8_t for the FP8 types (their bits: gantry/core/half.h converts them); uint8_t for bool (0 or 1);
// std::string for kString.
template <DType D>
struct DTypeStorage;
template <DType D>
using dtype_storage_t = typename DTypeStorage<D>::type;

#define GANTRY_DTYPE_STORAGE(D, T) \
  template <>                      \
  struct DTypeStorage<DType::D> {  \
    using type = T;                \
  };
GANTRY_DTYPE_STORAGE(kFloat32, float)
GANTRY_DTYPE_STORAGE(kFloat16, uint16_t)
GANTRY_DTYPE_STORAGE(kBFloat16, uint16_t)
GANTRY_DTYPE_STORAGE(kFloat64, double)
GANTRY_DTYPE_STORAGE(kInt8, int8_t)
GANTRY_DTYPE_STORAGE(kInt16, int16_t)
GANTRY_DTYPE_STORAGE(kInt32, int32_t)
GANTRY_DTYPE_STORAGE(kInt64, int64_t)
GANTRY_DTYPE_STORAGE(kUInt8, uint8_t)
GANTRY_DTYPE_STORAGE(kUInt16, uint16_t)
GANTRY_DTYPE_STORAGE(kUInt32, uint32_t)
GANTRY_DTYPE_STORAGE(kUInt64, uint64_t)
GANTRY_DTYPE_STORAGE(kBool, uint8_t)
GANTRY_DTYPE_STORAGE(kFloat8E4M3, uint8_t)
GANTRY_DTYPE_STORAGE(kFloat8E5M2, uint8_t)
GANTRY_DTYPE_STORAGE(kString, std::string)
#undef GANTRY_DTYPE_STORAGE

// A DType as a compile-time constant: what visit_dtype passes (tag.value is the DType).
template <DType D>
using DTypeTag = std::integral_constant<DType, D>;

// Kinds of element, for `if constexpr` on a tag's value.
constexpr bool is_integer_dtype(DType t) {
  return t == DType::kInt8 || t == DType::kInt16 || t == DType::kInt32 || t == DType::kInt64 ||
         t == DType::kUInt8 || t == DType::kUInt16 || t == DType::kUInt32 || t == DType::kUInt64;
}
// Stored as their bits in an unsigned integer (FP16, BF16, FP8): gantry/core/half.h converts them.
constexpr bool is_small_float_dtype(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat8E4M3 || t == DType::kFloat8E5M2;
}
constexpr bool is_float_dtype(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || is_small_float_dtype(t);
}

// Calls f(DTypeTag<t>{}) with the run-time `t` as a compile-time constant and returns what f returns (the
// same type for every DType): the one switch over DType that per-type code builds on, e.g.
//   visit_dtype(t, [&](auto tag) { using T = dtype_storage_t<tag.value>; ... });
template <typename F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kFloat32:
      return f(DTypeTag<DType::kFloat32>{});
    case DType::kFloat16:
      return f(DTypeTag<DType::kFloat16>{});
    case DType::kBFloat16:
      return f(DTypeTag<DType::kBFloat16>{});
    case DType::kFloat64:
      return f(DTypeTag<DType::kFloat64>{});
    case DType::kInt8:
      return f(DTypeTag<DType::kInt8>{});
    case DType::kInt16:
      return f(DTypeTag<DType::kInt16>{});
    case DType::kInt32:
      return f(DTypeTag<DType::kInt32>{});
    case DType::kInt64:
      return f(DTypeTag<DType::kInt64>{});
    case DType::kUInt8:
      return f(DTypeTag<DType::kUInt8>{});
    case DType::kUInt16:
      return f(DTypeTag<DType::kUInt16>{});
    case DType::kUInt32:
      return f(DTypeTag<DType::kUInt32>{});
    case DType::kUInt64:
      return f(DTypeTag<DType::kUInt64>{});
    case DType::kBool:
      return f(DTypeTag<DType::kBool>{});
    case DType::kFloat8E4M3:
      return f(DTypeTag<DType::kFloat8E4M3>{});
    case DType::kFloat8E5M2:
      return f(DTypeTag<DType::kFloat8E5M2>{});
    case DType::kString:
      return f(DTypeTag<DType::kString>{});
  }
  __builtin_unreachable();  // every enumerator is a case above (-Wswitch keeps it so)
}

// Whether T (cv-qualifiers aside) is the type elements of `t` are stored as (dtype_storage_t): what typed
// access to a tensor's data (Tensor::values<T>) requires. False for kString, whose elements are not data.
template <typename T>
bool dtype_stores(DType t) {
  if (t == DType::kString) return false;
  return visit_dtype(
      t, [](auto tag) { return std::is_same_v<std::remove_cv_t<T>, dtype_storage_t<tag.value>>; });
}

}  // namespace gantry
