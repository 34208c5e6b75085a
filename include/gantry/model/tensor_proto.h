// ONNX TensorProto (`.pb` files, as in ONNX backend-test data sets): read into tensors, write from tensors.
//
// Reading accepts raw_data and every typed field ONNX defines for the supported element types (float_data,
// int32_data for f16/bf16/i8/i16/u8/u16/bool and i32, int64_data, double_data, uint64_data for u32/u64,
// string_data). Corrupt or truncated bytes, negative dims, and data whose size does not match the dims are
// Corrupt errors; element types Gantry has no DType for (complex, float8, int4, ...) and external data are
// Unsupported. Sizes are checked against the input before anything is allocated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>

#include "gantry/core/dtype.h"
#include "gantry/core/status.h"
#include "gantry/core/tensor.h"  // NamedTensor

namespace gantry::model {

// ONNX TensorProto.DataType value <-> DType. nullopt for ONNX types Gantry cannot hold.
std::optional<DType> dtype_from_onnx(int32_t onnx_elem_type);
int32_t onnx_elem_type(DType dtype);
// ONNX's name for an element type ("FLOAT", "INT64", "FLOAT8E4M3FN", ...), "UNDEFINED(<n>)" if unknown.
std::string onnx_elem_type_name(int32_t onnx_elem_type);

// Parses a serialised TensorProto.
Result<NamedTensor> parse_tensor_proto(std::span<const std::byte> bytes);

// Reads a `.pb` file holding one TensorProto; errors are prefixed with the path.
Result<NamedTensor> read_tensor_proto(const std::filesystem::path& path);

// Serialises a host tensor as a TensorProto (raw_data, or string_data for strings).
Result<std::string> serialize_tensor_proto(ConstTensorView tensor, const std::string& name);
Status write_tensor_proto(const std::filesystem::path& path, ConstTensorView tensor, const std::string& name);

}  // namespace gantry::model
