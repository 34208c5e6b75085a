// Small binary floating-point formats (f16, bf16, FP8 E4M3 "fn", FP8 E5M2) for the weight transformations
// and their tests: the formats by the names these use, over gantry/core/half.h (the one definition of the
// encoding and decoding, and of their rounding, overflow and NaN rules).
#pragma once

#include "gantry/core/half.h"

namespace gantry::weights::detail {

using FloatFormat = SmallFloatFormat;

inline constexpr FloatFormat kF16 = kHalfFormat;
inline constexpr FloatFormat kBF16 = kBFloat16Format;
inline constexpr FloatFormat kE4M3 = kFloat8E4M3Format;
inline constexpr FloatFormat kE5M2 = kFloat8E5M2Format;

}  // namespace gantry::weights::detail
