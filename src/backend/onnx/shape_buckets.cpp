#include "gantry/backend/onnx/shape_buckets.h"

#include <algorithm>
#include <cstring>

namespace gantry::onnx {

namespace {

// Copies the leading corner common to `from` (shape a) and `to` (shape b), element size `elem`.
void copy_corner(const std::byte* from, const std::vector<int64_t>& a, std::byte* to,
                 const std::vector<int64_t>& b, size_t elem) {
  const size_t rank = a.size();
  if (rank == 0) {
    std::memcpy(to, from, elem);
    return;
  }
  // Strides (in bytes) of both layouts.
  std::vector<size_t> sa(rank), sb(rank);
  sa[rank - 1] = sb[rank - 1] = elem;
  for (size_t d = rank - 1; d > 0; --d) {
    sa[d - 1] = sa[d] * static_cast<size_t>(a[d]);
    sb[d - 1] = sb[d] * static_cast<size_t>(b[d]);
  }
  std::vector<int64_t> common(rank);
  for (size_t d = 0; d < rank; ++d) common[d] = std::min(a[d], b[d]);
  for (int64_t c : common)
    if (c == 0) return;
  const size_t row = static_cast<size_t>(common[rank - 1]) * elem;  // contiguous run in both
  std::vector<int64_t> idx(rank, 0);
  while (true) {
    size_t oa = 0, ob = 0;
    for (size_t d = 0; d + 1 < rank; ++d) {
      oa += static_cast<size_t>(idx[d]) * sa[d];
      ob += static_cast<size_t>(idx[d]) * sb[d];
    }
    std::memcpy(to + ob, from + oa, row);
    // Next index over the outer dims.
    size_t d = rank - 1;
    while (d > 0) {
      --d;
      if (++idx[d] < common[d]) break;
      idx[d] = 0;
      if (d == 0) return;
    }
    if (rank == 1) return;
  }
}

Result<Tensor> corner(ConstTensorView t, const Shape& shape, bool grow) {
  if (t.dtype() == DType::kString) return Unsupported("string tensors cannot be padded to a shape bucket");
  if (shape.rank() != t.shape().rank() || shape.is_dynamic())
    return InvalidArgument("bucket shape " + shape.to_string() + " does not fit tensor shape " +
                           t.shape().to_string());
  for (size_t d = 0; d < shape.rank(); ++d)
    if (grow ? shape[d] < t.shape()[d] : shape[d] > t.shape()[d])
      return InvalidArgument("bucket shape " + shape.to_string() + " cannot " +
                             (grow ? "hold " : "be cut from ") + t.shape().to_string());
  GANTRY_ASSIGN_OR_RETURN(Tensor out, Tensor::allocate(t.dtype(), shape));  // zero-filled
  if (out.byte_size() > 0 && t.byte_size() > 0)
    copy_corner(static_cast<const std::byte*>(t.data()), t.shape().dims(),
                static_cast<std::byte*>(out.data()), shape.dims(), dtype_size(t.dtype()));
  return out;
}

}  // namespace

bool BucketRules::active() const {
  if (granularity <= 0) return false;
  for (const auto& s : input_dims)
    if (!s.empty()) return true;
  return false;
}

Result<Bucket> bucket_for(const BucketRules& rules, const std::vector<backend::TensorInfo>& inputs,
                          const backend::NamedTensor* const* ordered) {
  Bucket b;
  for (size_t i = 0; i < inputs.size() && i < rules.input_dims.size(); ++i) {
    const auto& dims = rules.input_dims[i];
    if (dims.empty()) continue;
    const Shape& s = ordered[i]->tensor.shape();
    for (size_t d = 0; d < inputs[i].dim_names.size() && d < s.rank(); ++d) {
      const std::string& name = inputs[i].dim_names[d];
      if (name.empty() || !dims.count(name)) continue;
      auto [it, fresh] = b.request.emplace(name, s[d]);
      if (!fresh && it->second != s[d])
        return InvalidArgument("inputs disagree on dimension '" + name + "': " + std::to_string(it->second) +
                               " vs " + std::to_string(s[d]) + " (input '" + inputs[i].name + "')");
    }
  }
  for (const auto& [name, size] : b.request) {
    const int64_t g = std::max<int64_t>(1, rules.granularity);
    int64_t rounded = (size + g - 1) / g * g;
    auto cap = rules.max_dims.find(name);
    if (cap != rules.max_dims.end()) rounded = std::min(rounded, std::max(cap->second, size));
    b.sizes[name] = rounded;
  }
  return b;
}

Shape bucket_shape(const backend::TensorInfo& info, const std::set<std::string>& dims, const Shape& shape,
                   const std::map<std::string, int64_t>& sizes) {
  std::vector<int64_t> out = shape.dims();
  for (size_t d = 0; d < out.size() && d < info.dim_names.size(); ++d) {
    if (info.dim_names[d].empty() || !dims.count(info.dim_names[d])) continue;
    auto it = sizes.find(info.dim_names[d]);
    if (it != sizes.end()) out[d] = it->second;
  }
  return Shape(std::move(out));
}

Result<Tensor> pad_to(ConstTensorView t, const Shape& shape) { return corner(t, shape, true); }
Result<Tensor> trim_to(ConstTensorView t, const Shape& shape) { return corner(t, shape, false); }

}  // namespace gantry::onnx
