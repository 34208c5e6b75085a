// apply(), apply_all() and describe(): dispatch to the transformations in transform_ops.h, with the
// context every error message starts with.
#include "gantry/weights/transform.h"

#include <sstream>

#include "weights/transform_ops.h"

namespace gantry::weights {
namespace detail {

Result<DType> plain_type(const Weight& in, const std::string& ctx) {
  if (in.quantised())
    return InvalidArgument(ctx + ": the tensor is block-quantised (" + weight_type_name(in.type) +
                           "); dequantize it first");
  const DType t = std::get<DType>(in.type);
  if (in.data.dtype() != t || !(in.data.shape() == in.shape))
    return InvalidArgument(ctx + ": its data is " + std::string(dtype_name(in.data.dtype())) + " " +
                           in.data.shape().to_string() + ", not the weight's " + std::string(dtype_name(t)) +
                           " " + in.shape.to_string());
  if (in.data.element_count() > 0 && in.data.memory_class() == MemoryClass::kDevice)
    return InvalidArgument(ctx + ": its data is in device memory, which the host cannot read");
  return t;
}

Result<Weight> make_plain(const std::string& name, DType type, const Shape& shape, const std::string& ctx) {
  auto t = Tensor::allocate(type, shape);
  if (!t.ok()) return t.status().with_context(ctx);
  return Weight{name, type, shape, std::move(t).value()};
}

}  // namespace detail

namespace {

std::string join(const auto& values) {
  std::string s;
  for (size_t i = 0; i < values.size(); ++i) s += (i ? "," : "") + std::to_string(values[i]);
  return s;
}

std::string describe_slice(const Slice& s) {
  std::string out;
  for (size_t i = 0; i < s.dims.size(); ++i) {
    const SliceDim& d = s.dims[i];
    const bool has_stop = d.stop != std::numeric_limits<int64_t>::max();
    if (i) out += ",";
    if (d.start != 0 || has_stop) out += std::to_string(d.start);
    out += ":";
    if (has_stop) out += std::to_string(d.stop);
    if (d.step != 1) out += ":" + std::to_string(d.step);
  }
  return out;
}

}  // namespace

std::string describe(const Transform& t) {
  struct Visitor {
    std::string operator()(const Cast& c) const { return "cast " + std::string(dtype_name(c.to)); }
    std::string operator()(const Transpose& c) const { return "transpose " + join(c.perm); }
    std::string operator()(const Reshape& c) const { return "reshape " + join(c.shape); }
    std::string operator()(const Slice& c) const { return "slice " + describe_slice(c); }
    std::string operator()(const Scale& c) const {
      std::ostringstream os;
      os.precision(17);
      os << "scale " << c.factor;
      return os.str();
    }
    std::string operator()(const Quantize& c) const { return "quantize " + weight_type_name(c.to); }
    std::string operator()(const Dequantize&) const { return "dequantize"; }
  };
  return std::visit(Visitor{}, t);
}

Result<Weight> apply(const Weight& in, const Transform& t) {
  const std::string ctx = describe(t) + " on '" + in.name + "' " + in.shape.to_string();
  struct Visitor {
    const Weight& in;
    const std::string& ctx;
    Result<Weight> operator()(const Cast& c) const { return detail::cast_weight(in, c.to, ctx); }
    Result<Weight> operator()(const Transpose& c) const { return detail::transpose_weight(in, c.perm, ctx); }
    Result<Weight> operator()(const Reshape& c) const { return detail::reshape_weight(in, c.shape, ctx); }
    Result<Weight> operator()(const Slice& c) const { return detail::slice_weight(in, c.dims, ctx); }
    Result<Weight> operator()(const Scale& c) const { return detail::scale_weight(in, c.factor, ctx); }
    Result<Weight> operator()(const Quantize& c) const { return detail::quantize_weight(in, c.to, ctx); }
    Result<Weight> operator()(const Dequantize&) const { return detail::dequantize_weight(in, ctx); }
  };
  return std::visit(Visitor{in, ctx}, t);
}

Result<Weight> apply_all(Weight w, const std::vector<Transform>& ts) {
  for (const Transform& t : ts) {
    GANTRY_ASSIGN_OR_RETURN(w, weights::apply(w, t));  // qualified: ADL would find std::apply
  }
  return w;
}

}  // namespace gantry::weights
