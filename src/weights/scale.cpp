// Scale: multiplies every element of a float tensor. The product is computed in double and then rounded
// to the element type (round to nearest even); for a power-of-two factor the result is exact up to
// overflow/underflow.
#include <cstring>

#include "weights/float_format.h"
#include "weights/transform_ops.h"

namespace gantry::weights::detail {
namespace {

// Every element times `factor`, computed in double, rounded once to the element type.
template <DType D>
void scale_all(void* data, size_t n, double factor) {
  auto* p = static_cast<dtype_storage_t<D>*>(data);
  for (size_t i = 0; i < n; ++i) {
    if constexpr (is_small_float_dtype(D)) {
      constexpr FloatFormat f = small_float_format<D>();
      p[i] = static_cast<dtype_storage_t<D>>(encode_small_float(decode_small_float(p[i], f) * factor, f));
    } else {
      p[i] = static_cast<dtype_storage_t<D>>(static_cast<double>(p[i]) * factor);
    }
  }
}

}  // namespace

Result<Weight> scale_weight(const Weight& in, double factor, const std::string& ctx) {
  GANTRY_ASSIGN_OR_RETURN(const DType type, plain_type(in, ctx));
  GANTRY_ASSIGN_OR_RETURN(Weight out, make_plain(in.name, type, in.shape, ctx));
  const size_t n = static_cast<size_t>(in.data.element_count());
  if (!is_float_dtype(type)) {
    return InvalidArgument(ctx + ": scale applies to float tensors only, this one is " +
                           std::string(dtype_name(type)) + " (cast it to a float type first)");
  }
  if (n) std::memcpy(out.data.data(), in.data.data(), in.data.byte_size());
  void* d = out.data.data();
  visit_dtype(type, [&]<DType D>(DTypeTag<D>) {
    if constexpr (is_float_dtype(D)) scale_all<D>(d, n, factor);
  });
  return out;
}

}  // namespace gantry::weights::detail
