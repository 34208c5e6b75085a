// Reshape: same element count, at most one -1 (inferred). Block-quantised weights keep their bytes when
// the last dimension stays a multiple of the block size (blocks run along the flattened array).
#include <cstring>
#include <vector>

#include "weights/transform_ops.h"

namespace gantry::weights::detail {

Result<Weight> reshape_weight(const Weight& in, const std::vector<int64_t>& shape, const std::string& ctx) {
  const int64_t total = in.shape.element_count().value_or(-1);
  if (total < 0) return InvalidArgument(ctx + ": the input shape has no element count");
  std::vector<int64_t> dims(shape);
  int inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      if (inferred >= 0) return InvalidArgument(ctx + ": at most one dimension may be -1");
      inferred = static_cast<int>(i);
    } else if (dims[i] < 0) {
      return InvalidArgument(ctx + ": dimension " + std::to_string(i) + " is negative (" +
                             std::to_string(dims[i]) + ")");
    } else if (dims[i] != 0 && known > INT64_MAX / dims[i]) {
      return InvalidArgument(ctx + ": the new shape's element count overflows");
    } else {
      known *= dims[i];
    }
  }
  if (inferred >= 0) {
    if (known == 0 || total % known != 0)
      return InvalidArgument(ctx + ": cannot infer the -1 dimension: " + std::to_string(total) +
                             " elements are not a multiple of " + std::to_string(known));
    dims[static_cast<size_t>(inferred)] = total / known;
    known = total;
  }
  if (known != total)
    return InvalidArgument(ctx + ": the new shape has " + std::to_string(known) + " elements, the tensor " +
                           std::to_string(total));
  Weight out = in;
  out.shape = Shape(dims);
  if (in.quantised()) {
    const auto traits = model::ggml_type_traits(static_cast<uint32_t>(std::get<model::GgmlType>(in.type)));
    const int64_t block = traits ? traits->block_size : 1;
    if (dims.empty() || dims.back() % block != 0)
      return InvalidArgument(ctx + ": a " + weight_type_name(in.type) +
                             " weight's last dimension must stay a multiple of " + std::to_string(block) +
                             " (dequantize first)");
    GANTRY_ASSIGN_OR_RETURN(out.data, in.data.clone());
    return out;
  }
  GANTRY_ASSIGN_OR_RETURN(const DType type, plain_type(in, ctx));
  if (type == DType::kString) return InvalidArgument(ctx + ": string tensors cannot be reshaped");
  GANTRY_ASSIGN_OR_RETURN(out, make_plain(in.name, type, out.shape, ctx));
  if (total) std::memcpy(out.data.data(), in.data.data(), in.data.byte_size());
  return out;
}

}  // namespace gantry::weights::detail
