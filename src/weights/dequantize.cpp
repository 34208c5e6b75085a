// Dequantize transformation: any ggml block type back to f32 through ggml's own to_float from
// ggml_get_type_traits(), exact by construction (it is the very function ggml dequantises with), row by
// row.
#include <ggml.h>

#include "weights/transform_ops.h"

namespace gantry::weights::detail {

Result<Weight> dequantize_weight(const Weight& in, const std::string& ctx) {
  if (!in.quantised()) return InvalidArgument(ctx + ": the tensor is not block-quantised");
  const auto gt = std::get<model::GgmlType>(in.type);
  const auto traits = model::ggml_type_traits(static_cast<uint32_t>(gt));
  // (ggml_get_type_traits aborts on an id beyond its table: a type id this ggml build does not know.)
  const auto* gg = static_cast<uint32_t>(gt) < GGML_TYPE_COUNT
                       ? ggml_get_type_traits(static_cast<ggml_type>(gt))
                       : nullptr;
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
