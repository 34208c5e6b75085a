// Weight: one named tensor as the weight loader hands it out: plain elements (a core DType) or
// ggml block-quantised data (Q8_0, Q4_0, Q6_K, ...), which no DType can describe.
#pragma once

#include <optional>
#include <string>
#include <variant>

#include "gantry/core/dtype.h"
#include "gantry/core/shape.h"
#include "gantry/core/tensor.h"
#include "gantry/model/gguf_types.h"

namespace gantry::weights {

// A plain element type, or a ggml block type (never one of ggml's plain types: F32/F16/BF16/F64/I8..I64
// are DTypes).
using WeightType = std::variant<DType, model::GgmlType>;

// "f32", "bf16", "f8e4m3", ... or ggml's name ("q8_0", "q6_K").
std::string weight_type_name(const WeightType& t);
// Parses either spelling; nullopt when it is neither.
std::optional<WeightType> parse_weight_type(std::string_view name);

struct Weight {
  std::string name;
  WeightType type = DType::kFloat32;
  // Logical shape in row-major order (numpy/safetensors order; a GGUF tensor's ggml dims reversed).
  Shape shape;
  // The bytes. Plain types: a tensor of `type` and `shape` (a view into the source where nothing was
  // transformed, else owned). Block types: a 1-D u8 tensor holding the blocks, rows of the last dimension.
  Tensor data;

  bool quantised() const { return std::holds_alternative<model::GgmlType>(type); }
};

}  // namespace gantry::weights
