// Small binary floating-point formats (f16, bf16, FP8 E4M3 "fn", FP8 E5M2) encoded from and decoded to
// wider floats, bit-exactly. Internal to the weight transformations and their tests.
//
// Encoding rounds to nearest, ties to even, from a double (every f32 is exactly a double, so f32 input
// rounds once). A value too large for the format becomes infinity, except in E4M3 "fn", which has no
// infinity and saturates to +-448 (infinities included). NaN stays NaN (sign kept; E4M3: 0x7f/0xff).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace gantry::weights::detail {

struct FloatFormat {
  int exp_bits;
  int man_bits;
  int bias;
  bool has_inf;  // IEEE-like: the all-ones exponent is inf/NaN. false: E4M3 "fn" (only S.1111.111 is NaN)
};

inline constexpr FloatFormat kF16{5, 10, 15, true};
inline constexpr FloatFormat kBF16{8, 7, 127, true};
inline constexpr FloatFormat kE4M3{4, 3, 7, false};
inline constexpr FloatFormat kE5M2{5, 2, 15, true};

// The largest finite magnitude's code (without sign).
constexpr uint32_t max_finite_code(const FloatFormat& f) {
  const uint32_t all_ones_exp = (1u << f.exp_bits) - 1;
  return f.has_inf ? ((all_ones_exp - 1) << f.man_bits) | ((1u << f.man_bits) - 1)
                   : (all_ones_exp << f.man_bits) | ((1u << f.man_bits) - 2);
}
constexpr uint32_t inf_code(const FloatFormat& f) { return ((1u << f.exp_bits) - 1) << f.man_bits; }
constexpr uint32_t nan_code(const FloatFormat& f) {
  // Quiet NaN: all-ones exponent, top mantissa bit (E4M3 fn: all-ones everything).
  return f.has_inf ? inf_code(f) | (1u << (f.man_bits - 1)) : (1u << (f.exp_bits + f.man_bits)) - 1;
}

// Nearest code of `f` to `v`, ties to even (see the file comment for overflow and NaN).
inline uint32_t encode_float(double v, const FloatFormat& f) {
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
inline double decode_float(uint32_t c, const FloatFormat& f) {
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

// f16 -> f32 by bit manipulation (hot in dequantisation-free casts).
inline float f16_to_f32(uint16_t h) {
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
inline float bf16_to_f32(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

}  // namespace gantry::weights::detail
