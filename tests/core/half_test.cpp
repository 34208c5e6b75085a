// gantry/core/half.h: the fast FP16/BF16 decoders agree with the generic one on every code, encoding
// rounds to nearest even once, and overflow is reported only for finite values that became infinity.
#include "gantry/core/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace gantry {
namespace {

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

TEST(Half, FastDecodersAgreeWithTheGenericOneOnEveryCode) {
  for (uint32_t c = 0; c <= 0xffff; ++c) {
    const auto h = static_cast<uint16_t>(c);
    ASSERT_TRUE(same(half_to_float(h), decode_small_float(h, kHalfFormat))) << std::hex << c;
    ASSERT_TRUE(same(bfloat16_to_float(h), decode_small_float(h, kBFloat16Format))) << std::hex << c;
    // Every non-NaN code survives a round trip through f32.
    if (!std::isnan(half_to_float(h))) {
      ASSERT_EQ(float_to_half(half_to_float(h)), h) << std::hex << c;
    }
    if (!std::isnan(bfloat16_to_float(h))) {
      ASSERT_EQ(float_to_bfloat16(bfloat16_to_float(h)), h) << std::hex << c;
    }
  }
}

TEST(Half, RoundsToNearestEvenOnceFromDouble) {
  EXPECT_EQ(float_to_half(1.0), 0x3c00);
  EXPECT_EQ(float_to_half(1.0 + 0x1p-11), 0x3c00);            // a tie: to the even code
  EXPECT_EQ(float_to_half(1.0 + 3 * 0x1p-11), 0x3c02);        // a tie: to the even code, upwards
  EXPECT_EQ(float_to_half(1.0 + 0x1p-11 + 0x1p-40), 0x3c01);  // just above the tie (a float would lose it)
  EXPECT_EQ(float_to_half(0x1p-25), 0x0000);                  // half the smallest subnormal: to even 0
  EXPECT_EQ(float_to_half(0x1p-24), 0x0001);                  // the smallest subnormal
  EXPECT_EQ(float_to_half(-0.0), 0x8000);
  EXPECT_EQ(float_to_bfloat16(1.0 + 0x1p-8), 0x3f80);  // a tie: to the even code
  EXPECT_EQ(float_to_bfloat16(3.140625), 0x4049);
}

TEST(Half, OverflowIsReportedForFiniteValuesOnly) {
  bool overflow = false;
  EXPECT_EQ(float_to_half(65504.0, &overflow), 0x7bff);
  EXPECT_FALSE(overflow);
  EXPECT_EQ(float_to_half(65519.99, &overflow), 0x7bff);  // rounds down to the largest finite
  EXPECT_FALSE(overflow);
  EXPECT_EQ(float_to_half(65520.0, &overflow), 0x7c00);  // rounds up to infinity
  EXPECT_TRUE(overflow);
  overflow = false;
  EXPECT_EQ(float_to_half(-std::numeric_limits<double>::infinity(), &overflow), 0xfc00);
  EXPECT_FALSE(overflow) << "an infinity is not an overflow";
  EXPECT_EQ(float_to_half(std::numeric_limits<double>::quiet_NaN(), &overflow), 0x7e00);
  EXPECT_FALSE(overflow);
  EXPECT_EQ(float_to_bfloat16(1e39, &overflow), 0x7f80);
  EXPECT_TRUE(overflow);
  EXPECT_EQ(float_to_half(1e6), 0x7c00) << "without the flag: infinity all the same";
}

}  // namespace
}  // namespace gantry
