// Quantize / Dequantize transformations: f32 rows to Q8_0 / Q4_0 blocks (our kernels, bit-identical to
// ggml_quantize_chunk), and any ggml block type back to f32 through ggml's own to_float (exact by
// construction: it is the very function ggml dequantises with).
#include <ggml.h>

#include <cstring>

#include "weights/quantize_kernels.h"
#include "weights/transform_ops.h"

namespace gantry::weights::detail {

void quantize_q8_0(const float* x, uint8_t* y, int64_t k) {
  static const bool avx2 = cpu_has_avx2();
  avx2 ? quantize_q8_0_avx2(x, y, k) : quantize_q8_0_scalar(x, y, k);
}

void quantize_q4_0(const float* x, uint8_t* y, int64_t k) {
  static const bool avx2 = cpu_has_avx2();
  avx2 ? quantize_q4_0_avx2(x, y, k) : quantize_q4_0_scalar(x, y, k);
}

Result<Weight> quantize_weight(const Weight& in, model::GgmlType to, const std::string& ctx) {
  if (to != model::GgmlType::kQ8_0 && to != model::GgmlType::kQ4_0)
    return Unsupported(ctx + ": only q8_0 and q4_0 can be produced");
  GANTRY_ASSIGN_OR_RETURN(const DType type, plain_type(in, ctx));
  if (type != DType::kFloat32 && type != DType::kFloat16 && type != DType::kBFloat16 &&
      type != DType::kFloat64 && type != DType::kFloat8E4M3 && type != DType::kFloat8E5M2)
    return InvalidArgument(ctx + ": quantisation takes float input, this tensor is " +
                           std::string(dtype_name(type)) + " (cast it to f32 first)");
  const auto& dims = in.shape.dims();
  if (dims.empty() || dims.back() % kQK != 0)
    return InvalidArgument(ctx + ": the last dimension must be a multiple of " + std::to_string(kQK) +
                           " (the block size), the shape is " + in.shape.to_string());
  // ggml quantises f32: other float types go through f32 first (exact from f16, bf16 and FP8).
  if (type != DType::kFloat32) {
    GANTRY_ASSIGN_OR_RETURN(const Weight f32, cast_weight(in, DType::kFloat32, ctx));
    return quantize_weight(f32, to, ctx);
  }
  const int64_t n = in.data.element_count();
  const size_t block_bytes = to == model::GgmlType::kQ8_0 ? kQ8_0BlockBytes : kQ4_0BlockBytes;
  const int64_t bytes = n / kQK * static_cast<int64_t>(block_bytes);
  GANTRY_ASSIGN_OR_RETURN(Tensor data, Tensor::allocate(DType::kUInt8, Shape{bytes}));
  const auto* x = static_cast<const float*>(in.data.data());
  auto* y = static_cast<uint8_t*>(data.data());
  if (to == model::GgmlType::kQ8_0) {
    quantize_q8_0(x, y, n);
  } else {
    quantize_q4_0(x, y, n);
  }
  return Weight{in.name, to, in.shape, std::move(data)};
}

Result<Weight> dequantize_weight(const Weight& in, const std::string& ctx) {
  if (!in.quantised()) return InvalidArgument(ctx + ": the tensor is not block-quantised");
  const auto gt = std::get<model::GgmlType>(in.type);
  const auto traits = model::ggml_type_traits(static_cast<uint32_t>(gt));
  const auto* gg = ggml_get_type_traits(static_cast<ggml_type>(gt));
  if (!traits || !gg || !gg->to_float || gg->blck_size != static_cast<int64_t>(traits->block_size) ||
      gg->type_size != traits->type_size)
    return Unsupported(ctx + ": this ggml build cannot dequantise " + weight_type_name(in.type));
  const auto& dims = in.shape.dims();
  const int64_t n = in.shape.element_count().value_or(-1);
  if (dims.empty() || n < 0 || dims.back() % traits->block_size != 0)
    return InvalidArgument(ctx + ": the last dimension must be a multiple of the block size " +
                           std::to_string(traits->block_size));
  const uint64_t want = n / traits->block_size * traits->type_size;
  if (in.data.byte_size() != want)
    return InvalidArgument(ctx + ": holds " + std::to_string(in.data.byte_size()) + " bytes, " +
                           weight_type_name(in.type) + " " + in.shape.to_string() + " needs " +
                           std::to_string(want));
  GANTRY_ASSIGN_OR_RETURN(Weight out, make_plain(in.name, DType::kFloat32, in.shape, ctx));
  // One row at a time: some types' to_float expects whole rows (k = a row's elements).
  const int64_t row = dims.back();
  const size_t row_bytes = static_cast<size_t>(row / traits->block_size * traits->type_size);
  const auto* src = static_cast<const uint8_t*>(in.data.data());
  auto* dst = static_cast<float*>(out.data.data());
  for (int64_t r = 0; row > 0 && r < n / row; ++r) gg->to_float(src + r * row_bytes, dst + r * row, row);
  return out;
}

}  // namespace gantry::weights::detail
