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

bool is_float(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat64 ||
         t == DType::kFloat8E4M3 || t == DType::kFloat8E5M2;
}
bool is_int(DType t) {
  switch (t) {
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUInt8:
    case DType::kUInt16:
    case DType::kUInt32:
    case DType::kUInt64:
      return true;
    default:
      return false;
  }
}

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
  switch (t) {
    case DType::kFloat32:
      return load<float>(p);
    case DType::kFloat64:
      return load<double>(p);
    case DType::kFloat16:
      return half_to_float(load<uint16_t>(p));
    case DType::kBFloat16:
      return bfloat16_to_float(load<uint16_t>(p));
    case DType::kFloat8E4M3:
      return decode_small_float(load<uint8_t>(p), kE4M3);
    case DType::kFloat8E5M2:
      return decode_small_float(load<uint8_t>(p), kE5M2);
    case DType::kBool:
      return load<uint8_t>(p) != 0 ? 1.0 : 0.0;
    default:
      return 0;
  }
}

i128 load_int(DType t, const std::byte* p) {
  switch (t) {
    case DType::kInt8:
      return load<int8_t>(p);
    case DType::kInt16:
      return load<int16_t>(p);
    case DType::kInt32:
      return load<int32_t>(p);
    case DType::kInt64:
      return load<int64_t>(p);
    case DType::kUInt8:
      return load<uint8_t>(p);
    case DType::kUInt16:
      return load<uint16_t>(p);
    case DType::kUInt32:
      return load<uint32_t>(p);
    case DType::kUInt64:
      return load<uint64_t>(p);
    default:
      return 0;
  }
}

// The range of an integer type.
void int_range(DType t, i128& lo, i128& hi) {
  switch (t) {
    case DType::kInt8:
      lo = INT8_MIN, hi = INT8_MAX;
      return;
    case DType::kInt16:
      lo = INT16_MIN, hi = INT16_MAX;
      return;
    case DType::kInt32:
      lo = INT32_MIN, hi = INT32_MAX;
      return;
    case DType::kInt64:
      lo = INT64_MIN, hi = INT64_MAX;
      return;
    case DType::kUInt8:
      lo = 0, hi = UINT8_MAX;
      return;
    case DType::kUInt16:
      lo = 0, hi = UINT16_MAX;
      return;
    case DType::kUInt32:
      lo = 0, hi = UINT32_MAX;
      return;
    default:
      lo = 0, hi = UINT64_MAX;
      return;
  }
}

void store_int(DType t, std::byte* p, i128 v) {
  switch (t) {
    case DType::kInt8:
      return store(p, static_cast<int8_t>(v));
    case DType::kInt16:
      return store(p, static_cast<int16_t>(v));
    case DType::kInt32:
      return store(p, static_cast<int32_t>(v));
    case DType::kInt64:
      return store(p, static_cast<int64_t>(v));
    case DType::kUInt8:
      return store(p, static_cast<uint8_t>(v));
    case DType::kUInt16:
      return store(p, static_cast<uint16_t>(v));
    case DType::kUInt32:
      return store(p, static_cast<uint32_t>(v));
    default:
      return store(p, static_cast<uint64_t>(v));
  }
}

// A float value into a float target, rounding once to nearest even.
void store_float(DType t, std::byte* p, double v) {
  switch (t) {
    case DType::kFloat32:
      return store(p, static_cast<float>(v));  // IEEE conversion: round to nearest even
    case DType::kFloat64:
      return store(p, v);
    case DType::kFloat16:
      return store(p, static_cast<uint16_t>(encode_small_float(v, kF16)));
    case DType::kBFloat16:
      return store(p, static_cast<uint16_t>(encode_small_float(v, kBF16)));
    case DType::kFloat8E4M3:
      return store(p, static_cast<uint8_t>(encode_small_float(v, kE4M3)));
    case DType::kFloat8E5M2:
      return store(p, static_cast<uint8_t>(encode_small_float(v, kE5M2)));
    default:
      return;
  }
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
