// Transformations the weight loader applies to a tensor on its way out, in the order a spec lists them.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/weights/weight.h"

namespace gantry::weights {

// To another plain type: float <-> float rounds to nearest even (FP8 E4M3 saturates to +-448 as the
// OCP "fn" format has no infinity; E5M2 overflows to infinity); float -> int truncates toward zero and
// fails on NaN or out-of-range values; int -> int fails when a value does not fit. bool <-> any: 0/1.
struct Cast {
  DType to = DType::kFloat32;
};
// Output dimension i is input dimension perm[i]; perm is a permutation of 0..rank-1.
struct Transpose {
  std::vector<int> perm;
};
// Same element count; at most one -1 (inferred).
struct Reshape {
  std::vector<int64_t> shape;
};
// Python slicing per dimension (negative start/stop count from the end; step > 0). Dimensions beyond
// the listed ones are kept whole.
struct SliceDim {
  int64_t start = 0;
  int64_t stop = std::numeric_limits<int64_t>::max();
  int64_t step = 1;
};
struct Slice {
  std::vector<SliceDim> dims;
};
// Multiplies every element (float types only; integer tensors: cast first).
struct Scale {
  double factor = 1.0;
};
// To a ggml block type (Q8_0 or Q4_0), bit-identical to ggml_quantize_chunk on the f32 values; the last
// dimension must be a multiple of the block size (32). Any float type is accepted (f16, bf16, f64 and
// FP8 are cast to f32 first: exactly, except f64, which rounds); integer input is refused.
struct Quantize {
  model::GgmlType to = model::GgmlType::kQ8_0;
};
// Block-quantised -> f32, exactly as ggml's to_float for that type (every ggml block type).
struct Dequantize {};

using Transform = std::variant<Cast, Transpose, Reshape, Slice, Scale, Quantize, Dequantize>;

// Applies one transformation. `in` is never modified (it may be a read-only view of a mapped file); the
// result owns its data. Errors start with describe(t), the tensor's name and shape:
// "slice 0:10,::0 on 'blk.0.attn_q.weight' [64,64]: step must be > 0 ...".
// Call it as weights::apply(w, t) when `t` is a Transform variable: unqualified, argument-dependent lookup
// also finds std::apply (Transform is a std::variant) and the call does not compile.
Result<Weight> apply(const Weight& in, const Transform& t);
// Applies all in order.
Result<Weight> apply_all(Weight w, const std::vector<Transform>& ts);

// Parses the CLI spellings: "--cast f16" -> parse_cast("f16"); transpose "1,0"; reshape "4,-1";
// slice "0:10,::2" (numpy syntax, one part per dimension); quantise "q8_0"|"q4_0".
Result<Transform> parse_cast(std::string_view s);
Result<Transform> parse_transpose(std::string_view s);
Result<Transform> parse_reshape(std::string_view s);
Result<Transform> parse_slice(std::string_view s);
Result<Transform> parse_quantize(std::string_view s);

// A readable description ("cast f16", "slice 0:10,::2") for logs and errors.
std::string describe(const Transform& t);

}  // namespace gantry::weights
