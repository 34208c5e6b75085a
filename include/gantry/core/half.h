// Small binary floating-point formats to and from wider floats, bit-exactly: IEEE 754 binary16 ("half",
// FP16) and bfloat16 (BF16) by name, and any format of the same shape (the FP8 ones of the weight
// transformations) through SmallFloatFormat. The one definition every reader and writer of 16-bit floats
// uses: tensors over HTTP, weights, test data.
//
// Encoding rounds to nearest, ties to even, once, from a double (every f32 is exactly a double). A finite
// value too large for the format becomes infinity (and sets *overflow when asked), except in formats
// without infinity (FP8 E4M3 "fn"), which saturate to their largest finite value, infinities included. NaN
// stays NaN, quiet, sign kept. Decoding is exact (as a double, and as a float for every format here).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "gantry/core/dtype.h"

namespace gantry {

struct SmallFloatFormat {
  int exp_bits;
  int man_bits;
  int bias;
  bool has_inf;  // IEEE-like: the all-ones exponent is inf/NaN. false: E4M3 "fn" (only S.1111.111 is NaN)
};

inline constexpr SmallFloatFormat kHalfFormat{5, 10, 15, true};
inline constexpr SmallFloatFormat kBFloat16Format{8, 7, 127, true};
inline constexpr SmallFloatFormat kFloat8E4M3Format{4, 3, 7, false};  // OCP FP8 E4M3 "fn"
inline constexpr SmallFloatFormat kFloat8E5M2Format{5, 2, 15, true};  // OCP FP8 E5M2

// The format of a DType stored as small-float bits (is_small_float_dtype).
template <DType D>
requires(is_small_float_dtype(D)) constexpr SmallFloatFormat small_float_format() {
  if constexpr (D == DType::kFloat16)
    return kHalfFormat;
  else if constexpr (D == DType::kBFloat16)
    return kBFloat16Format;
  else if constexpr (D == DType::kFloat8E4M3)
    return kFloat8E4M3Format;
  else
    return kFloat8E5M2Format;
}

// The largest finite magnitude's code (without sign).
constexpr uint32_t max_finite_code(const SmallFloatFormat& f) {
  const uint32_t all_ones_exp = (1u << f.exp_bits) - 1;
  return f.has_inf ? ((all_ones_exp - 1) << f.man_bits) | ((1u << f.man_bits) - 1)
                   : (all_ones_exp << f.man_bits) | ((1u << f.man_bits) - 2);
}
constexpr uint32_t inf_code(const SmallFloatFormat& f) { return ((1u << f.exp_bits) - 1) << f.man_bits; }
constexpr uint32_t nan_code(const SmallFloatFormat& f) {
  // Quiet NaN: all-ones exponent, top mantissa bit (E4M3 fn: all-ones everything).
  return f.has_inf ? inf_code(f) | (1u << (f.man_bits - 1)) : (1u << (f.exp_bits + f.man_bits)) - 1;
}

// Nearest code of `f` to `v`, ties to even (see the file comment for overflow and NaN).
inline uint32_t encode_small_float(double v, const SmallFloatFormat& f) {
  const uint64_t bits = std::bit_cast<uint64_t>(v);
  const uint32_t sign = static_cast<uint32_t>(bits >> 63) << (f.exp_bits + f.man_bits);
  const uint64_t abs_bits = bits & ~(uint64_t{1} << 63);
  if (abs_bits > 0x7ff0000000000000ull) return sign | nan_code(f);
  if (abs_bits == 0x7ff0000000000000ull) return sign | (f.has_inf ? inf_code(f) : max_finite_code(f));
  // Significand with the implicit bit (53 bits) and the unbiased exponent of its lowest bit.
  int exp = static_cast<int>(abs_bits >> 52);
  uint64_t mant = abs_bits & ((uint64_t{1} << 52) - 1);
  if (exp == 0) {
    exp = 1;  // f64 subnormal
  } else {
    mant |= uint64_t{1} << 52;
  }
  // Target exponent field for this value if it were normal there.
  const int target_exp = exp - 1023 + f.bias;
  // Bits of the 53-bit significand to drop: the mantissa width difference, plus the extra shift of a
  // subnormal result.
  int shift = 52 - f.man_bits + (target_exp < 1 ? 1 - target_exp : 0);
  uint64_t code;
  if (shift >= 64) {
    code = 0;  // far below half the smallest subnormal
  } else {
    const uint64_t kept = mant >> shift;
    const uint64_t rest = mant & ((uint64_t{1} << shift) - 1);
    const uint64_t half = uint64_t{1} << (shift - 1);
    code = kept;
    if (rest > half || (rest == half && (kept & 1))) ++code;
    // A normal result: add the exponent field (the significand's implicit bit carries into it, which is
    // why (target_exp - 1) is added rather than target_exp). Rounding up past the mantissa carries too.
    if (target_exp >= 1) code += static_cast<uint64_t>(target_exp - 1) << f.man_bits;
  }
  if (code > max_finite_code(f)) code = f.has_inf ? inf_code(f) : max_finite_code(f);
  return sign | static_cast<uint32_t>(code);
}

// The value of code `c` of format `f` (exact as a double; as a float too for every format here).
inline double decode_small_float(uint32_t c, const SmallFloatFormat& f) {
  const uint32_t man_mask = (1u << f.man_bits) - 1;
  const uint32_t exp_max = (1u << f.exp_bits) - 1;
  const bool negative = (c >> (f.exp_bits + f.man_bits)) & 1;
  const uint32_t e = (c >> f.man_bits) & exp_max;
  const uint32_t m = c & man_mask;
  double v;
  if (f.has_inf && e == exp_max) {
    v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (!f.has_inf && e == exp_max && m == man_mask) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - f.bias - f.man_bits);
  } else {
    v = std::ldexp(static_cast<double>(m | (1u << f.man_bits)), static_cast<int>(e) - f.bias - f.man_bits);
  }
  return negative ? -v : v;
}

// FP16 -> f32 by bit manipulation (hot: casts, codecs); equal to decode_small_float(h, kHalfFormat).
inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t e = (h >> 10) & 0x1f;
  const uint32_t m = h & 0x3ff;
  if (e == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    const float v = static_cast<float>(m) * 0x1p-24f;  // exact
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((e + 112) << 23) | (m << 13));
}

// BF16 -> f32: the top half of the f32's bits.
inline float bfloat16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

// f64 (or f32) -> FP16 / BF16, rounded once to nearest even. `overflow`, when given, is set when a finite
// `v` became infinity (and left alone otherwise).
inline uint16_t float_to_half(double v, bool* overflow = nullptr) {
  const auto c = static_cast<uint16_t>(encode_small_float(v, kHalfFormat));
  if (overflow && (c & 0x7fff) == inf_code(kHalfFormat) && std::isfinite(v)) *overflow = true;
  return c;
}
inline uint16_t float_to_bfloat16(double v, bool* overflow = nullptr) {
  const auto c = static_cast<uint16_t>(encode_small_float(v, kBFloat16Format));
  if (overflow && (c & 0x7fff) == inf_code(kBFloat16Format) && std::isfinite(v)) *overflow = true;
  return c;
}

}  // namespace gantry
