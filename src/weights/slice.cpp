// Slice: Python/numpy start:stop:step per dimension, step > 0; dimensions beyond the listed ones whole.
#include <algorithm>
#include <vector>

#include "weights/strided_copy.h"
#include "weights/transform_ops.h"

namespace gantry::weights::detail {
namespace {

// Python's rule for a positive step: negative indices count from the end, then clamp to [0, dim].
int64_t normalise(int64_t i, int64_t dim) {
  if (i < 0) i = std::max<int64_t>(i + dim, 0);
  return std::min(i, dim);
}

}  // namespace

Result<Weight> slice_weight(const Weight& in, const std::vector<SliceDim>& sl, const std::string& ctx) {
  GANTRY_ASSIGN_OR_RETURN(const DType type, plain_type(in, ctx));
  if (type == DType::kString) return InvalidArgument(ctx + ": string tensors cannot be sliced");
  const auto& dims = in.shape.dims();
  if (sl.size() > dims.size())
    return InvalidArgument(ctx + ": " + std::to_string(sl.size()) + " slice parts for a tensor of rank " +
                           std::to_string(dims.size()));
  const auto in_strides = row_major_strides(dims);
  std::vector<int64_t> out_dims(dims), strides(in_strides);
  int64_t offset = 0;
  for (size_t i = 0; i < sl.size(); ++i) {
    if (sl[i].step <= 0)
      return InvalidArgument(ctx + ": step must be > 0 (dimension " + std::to_string(i) + " has step " +
                             std::to_string(sl[i].step) + ")");
    const int64_t start = normalise(sl[i].start, dims[i]);
    const int64_t stop = normalise(sl[i].stop, dims[i]);
    // (Written so that no step, however large, overflows: a step beyond the dimension takes one element.)
    const int64_t count = stop > start ? (stop - start - 1) / sl[i].step + 1 : 0;
    out_dims[i] = count;
    strides[i] = count > 1 ? in_strides[i] * sl[i].step : in_strides[i];
    offset += start * in_strides[i];
  }
  GANTRY_ASSIGN_OR_RETURN(Weight out, make_plain(in.name, type, Shape(out_dims), ctx));
  const size_t esize = dtype_size(type);
  if (out.data.element_count() > 0)
    strided_copy(static_cast<const std::byte*>(in.data.data()) + offset * static_cast<int64_t>(esize), esize,
                 out_dims, strides, static_cast<std::byte*>(out.data.data()));
  return out;
}

}  // namespace gantry::weights::detail
