// Cast between plain element types. Every element goes through one exact intermediate: a double for
// float and bool sources (every f16/bf16/f32/FP8 value is exactly a double), a 128-bit integer for integer
// sources; then it is encoded into the target with one rounding (see transform.h for the contract).
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <vector>

#include "weights/float_format.h"
#include "weights/transform_ops.h"

namespace gantry::weights::detail {
namespace {

__extension__ typedef __int128 i128;

bool is_float(DType t) { return is_float_dtype(t); }
bool is_int(DType t) { return is_integer_dtype(t); }

template <typename T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T>
void store(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

// Source element i as a double (float and bool sources).
double load_double(DType t, const std::byte* p) {
  return visit_dtype(t, [p]<DType D>(DTypeTag<D>) -> double {
    if constexpr (D == DType::kBool)
      return load<uint8_t>(p) != 0 ? 1.0 : 0.0;
    else if constexpr (is_small_float_dtype(D))
      return decode_small_float(load<dtype_storage_t<D>>(p), small_float_format<D>());
    else if constexpr (is_float_dtype(D))
      return load<dtype_storage_t<D>>(p);
    else
      return 0;
  });
}

i128 load_int(DType t, const std::byte* p) {
  return visit_dtype(t, [p]<DType D>(DTypeTag<D>) -> i128 {
    if constexpr (is_integer_dtype(D))
      return load<dtype_storage_t<D>>(p);
    else
      return 0;
  });
}

// The range of an integer type.
void int_range(DType t, i128& lo, i128& hi) {
  visit_dtype(t, [&]<DType D>(DTypeTag<D>) {
    using T = std::conditional_t<is_integer_dtype(D), dtype_storage_t<D>, uint64_t>;
    lo = std::numeric_limits<T>::min();
    hi = std::numeric_limits<T>::max();
  });
}

void store_int(DType t, std::byte* p, i128 v) {
  visit_dtype(t, [&]<DType D>(DTypeTag<D>) {
    using T = std::conditional_t<is_integer_dtype(D), dtype_storage_t<D>, uint64_t>;
    store(p, static_cast<T>(v));
  });
}

// A float value into a float target, rounding once to nearest even.
void store_float(DType t, std::byte* p, double v) {
  visit_dtype(t, [&]<DType D>(DTypeTag<D>) {
    if constexpr (is_small_float_dtype(D))
      store(p, static_cast<dtype_storage_t<D>>(encode_small_float(v, small_float_format<D>())));
    else if constexpr (D == DType::kFloat32)
      store(p, static_cast<float>(v));  // IEEE conversion: round to nearest even
    else if constexpr (D == DType::kFloat64)
      store(p, v);
  });
}

// An integer as a double rounded to odd at 53 bits: exact below 2^53, and above it a value that every
// later round-to-nearest-even to at most 51 bits (f32, f16, bf16, FP8) rounds as the integer itself
// would (round-to-odd makes the double rounding harmless).
double int_to_double_odd(i128 v) {
  const bool neg = v < 0;
  unsigned __int128 mag = neg ? static_cast<unsigned __int128>(-v) : static_cast<unsigned __int128>(v);
  int width = 0;
  for (unsigned __int128 m = mag; m != 0; m >>= 1) ++width;
  if (width > 53) {
    const int drop = width - 53;
    const unsigned __int128 low_mask = (static_cast<unsigned __int128>(1) << drop) - 1;
    const bool sticky = (mag & low_mask) != 0;
    mag &= ~low_mask;
    if (sticky) mag |= static_cast<unsigned __int128>(1) << drop;
  }
  const double d = static_cast<double>(mag);  // exact: at most 53 significant bits
  return neg ? -d : d;
}

std::string int_text(i128 v) {
  if (v == 0) return "0";
  const bool neg = v < 0;
  unsigned __int128 m = neg ? static_cast<unsigned __int128>(-v) : static_cast<unsigned __int128>(v);
  std::string s;
  while (m) {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(m % 10)));
    m /= 10;
  }
  return neg ? "-" + s : s;
}

std::string double_text(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

// The common checkpoint conversions as tight loops (same results as the generic path below).
template <typename In, typename Out, typename Fn>
void convert_all(const std::byte* src, std::byte* dst, size_t n, Fn fn) {
  for (size_t i = 0; i < n; ++i)
    store(dst + i * sizeof(Out), static_cast<Out>(fn(load<In>(src + i * sizeof(In)))));
}

bool fast_cast(DType from, DType to, const std::byte* src, std::byte* dst, size_t n) {
  if (from == DType::kFloat16 && to == DType::kFloat32) {
    convert_all<uint16_t, float>(src, dst, n, half_to_float);
  } else if (from == DType::kBFloat16 && to == DType::kFloat32) {
    convert_all<uint16_t, float>(src, dst, n, bfloat16_to_float);
  } else if (from == DType::kFloat32 && to == DType::kFloat16) {
    convert_all<float, uint16_t>(src, dst, n, [](float v) { return encode_small_float(v, kF16); });
  } else if (from == DType::kFloat32 && to == DType::kBFloat16) {
    convert_all<float, uint16_t>(src, dst, n, [](float v) { return encode_small_float(v, kBF16); });
  } else if (from == DType::kBFloat16 && to == DType::kFloat16) {
    convert_all<uint16_t, uint16_t>(
        src, dst, n, [](uint16_t v) { return encode_small_float(bfloat16_to_float(v), kF16); });
  } else if (from == DType::kFloat16 && to == DType::kBFloat16) {
    convert_all<uint16_t, uint16_t>(src, dst, n,
                                    [](uint16_t v) { return encode_small_float(half_to_float(v), kBF16); });
  } else {
    return false;
  }
  return true;
}

}  // namespace

Result<Weight> cast_weight(const Weight& in, DType to, const std::string& ctx) {
  GANTRY_ASSIGN_OR_RETURN(const DType from, plain_type(in, ctx));
  if (from == DType::kString || to == DType::kString)
    return InvalidArgument(ctx + ": string tensors cannot be cast");
  GANTRY_ASSIGN_OR_RETURN(Weight out, make_plain(in.name, to, in.shape, ctx));
  const size_t n = static_cast<size_t>(in.data.element_count());
  const size_t in_size = dtype_size(from);
  const size_t out_size = dtype_size(to);
  const auto* src = static_cast<const std::byte*>(in.data.data());
  auto* dst = static_cast<std::byte*>(out.data.data());
  if (from == to) {
    if (n) std::memcpy(dst, src, n * in_size);
    return out;
  }
  if (fast_cast(from, to, src, dst, n)) return out;
  i128 lo = 0, hi = 0;
  if (is_int(to)) int_range(to, lo, hi);

  for (size_t i = 0; i < n; ++i) {
    const std::byte* p = src + i * in_size;
    std::byte* q = dst + i * out_size;
    if (is_int(from)) {
      const i128 v = load_int(from, p);
      if (to == DType::kBool) {
        store<uint8_t>(q, v != 0);
      } else if (is_int(to)) {
        if (v < lo || v > hi)
          return InvalidArgument(ctx + ": element " + std::to_string(i) + " (" + int_text(v) +
                                 ") does not fit in " + std::string(dtype_name(to)));
        store_int(to, q, v);
      } else if (to == DType::kFloat64) {
        store(q, static_cast<double>(v));  // one IEEE rounding
      } else {
        store_float(to, q, int_to_double_odd(v));
      }
      continue;
    }
    const double v = load_double(from, p);
    if (to == DType::kBool) {
      store<uint8_t>(q, v != 0);
    } else if (is_float(to)) {
      store_float(to, q, v);
    } else {
      // float -> int: truncate toward zero; NaN, infinities and values outside the range fail.
      if (std::isnan(v))
        return InvalidArgument(ctx + ": element " + std::to_string(i) + " is NaN, which no " +
                               std::string(dtype_name(to)) + " can hold");
      const double t = std::trunc(v);
      // The bounds as doubles are exact powers of two (hi + 1) and -2^k or 0 (lo).
      const double lo_d = static_cast<double>(lo);
      const double hi_plus_one = std::ldexp(1.0, std::bit_width(static_cast<uint64_t>(hi)));
      if (!(t >= lo_d && t < hi_plus_one))
        return InvalidArgument(ctx + ": element " + std::to_string(i) + " (" + double_text(v) +
                               ") is out of the range of " + std::string(dtype_name(to)));
      store_int(to, q, static_cast<i128>(t));
    }
  }
  return out;
}

}  // namespace gantry::weights::detail
