// Scale: multiplies every element of a float tensor. The product is computed in double and then rounded
// to the element type (round to nearest even); for a power-of-two factor the result is exact up to
// overflow/underflow.
#include <cstring>

#include "weights/float_format.h"
#include "weights/transform_ops.h"

namespace gantry::weights::detail {
namespace {

template <typename T>
void scale_plain(void* data, size_t n, double factor) {
  auto* p = static_cast<T*>(data);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(static_cast<double>(p[i]) * factor);
}

template <typename Code>
void scale_coded(void* data, size_t n, double factor, const FloatFormat& f) {
  auto* p = static_cast<Code*>(data);
  for (size_t i = 0; i < n; ++i)
    p[i] = static_cast<Code>(encode_small_float(decode_small_float(p[i], f) * factor, f));
}

}  // namespace

Result<Weight> scale_weight(const Weight& in, double factor, const std::string& ctx) {
  GANTRY_ASSIGN_OR_RETURN(const DType type, plain_type(in, ctx));
  GANTRY_ASSIGN_OR_RETURN(Weight out, make_plain(in.name, type, in.shape, ctx));
  const size_t n = static_cast<size_t>(in.data.element_count());
  switch (type) {
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat8E4M3:
    case DType::kFloat8E5M2:
      break;
    default:
      return InvalidArgument(ctx + ": scale applies to float tensors only, this one is " +
                             std::string(dtype_name(type)) + " (cast it to a float type first)");
  }
  if (n) std::memcpy(out.data.data(), in.data.data(), in.data.byte_size());
  void* d = out.data.data();
  switch (type) {
    case DType::kFloat32:
      scale_plain<float>(d, n, factor);
      break;
    case DType::kFloat64:
      scale_plain<double>(d, n, factor);
      break;
    case DType::kFloat16:
      scale_coded<uint16_t>(d, n, factor, kF16);
      break;
    case DType::kBFloat16:
      scale_coded<uint16_t>(d, n, factor, kBF16);
      break;
    case DType::kFloat8E4M3:
      scale_coded<uint8_t>(d, n, factor, kE4M3);
      break;
    default:
      scale_coded<uint8_t>(d, n, factor, kE5M2);
      break;
  }
  return out;
}

}  // namespace gantry::weights::detail
