// Quantize transformation: float rows to Q8_0 / Q4_0 blocks with our kernels (quantize_kernels.h),
// bit-identical to ggml_quantize_chunk.
#include <cstring>

#include "weights/quantize_kernels.h"
#include "weights/transform_ops.h"

namespace gantry::weights::detail {

void quantize_q8_0(const float* x, uint8_t* y, int64_t k) {
  static const bool avx2 = cpu_has_avx2();
  avx2 ? quantize_q8_0_avx2(x, y, k) : quantize_q8_0_portable(x, y, k);
}

void quantize_q4_0(const float* x, uint8_t* y, int64_t k) {
  static const bool avx2 = cpu_has_avx2();
  avx2 ? quantize_q4_0_avx2(x, y, k) : quantize_q4_0_portable(x, y, k);
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

}  // namespace gantry::weights::detail
