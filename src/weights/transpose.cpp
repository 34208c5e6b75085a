// Transpose: output dimension i is input dimension perm[i] (any permutation, any plain element type).
#include <vector>

#include "weights/strided_copy.h"
#include "weights/transform_ops.h"

namespace gantry::weights::detail {

Result<Weight> transpose_weight(const Weight& in, const std::vector<int>& perm, const std::string& ctx) {
  GANTRY_ASSIGN_OR_RETURN(const DType type, plain_type(in, ctx));
  if (type == DType::kString) return InvalidArgument(ctx + ": string tensors cannot be transposed");
  const auto& dims = in.shape.dims();
  if (perm.size() != dims.size())
    return InvalidArgument(ctx + ": the permutation has " + std::to_string(perm.size()) +
                           " entries but the tensor has rank " + std::to_string(dims.size()));
  std::vector<bool> seen(dims.size(), false);
  for (int p : perm) {
    if (p < 0 || static_cast<size_t>(p) >= dims.size() || seen[static_cast<size_t>(p)])
      return InvalidArgument(ctx + ": not a permutation of 0.." + std::to_string(dims.size() - 1) +
                             " (entry " + std::to_string(p) + ")");
    seen[static_cast<size_t>(p)] = true;
  }
  const auto in_strides = row_major_strides(dims);
  std::vector<int64_t> out_dims(dims.size()), strides(dims.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    out_dims[i] = dims[static_cast<size_t>(perm[i])];
    strides[i] = in_strides[static_cast<size_t>(perm[i])];
  }
  GANTRY_ASSIGN_OR_RETURN(Weight out, make_plain(in.name, type, Shape(out_dims), ctx));
  strided_copy(static_cast<const std::byte*>(in.data.data()), dtype_size(type), out_dims, strides,
               static_cast<std::byte*>(out.data.data()));
  return out;
}

}  // namespace gantry::weights::detail
