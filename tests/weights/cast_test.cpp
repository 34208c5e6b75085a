// Casts: FP8 decoded with the formats' formulas written here, f32 -> FP8 against an exhaustive nearest-code
// search, f16/bf16 against known bit patterns and ggml's own f16 conversion, integer ranges and errors.
#include <ggml.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gantry/weights/transform.h"

namespace gantry::weights {
namespace {

template <typename T>
Weight make(DType type, const std::vector<T>& values, std::string name = "w") {
  auto t = Tensor::from_values(type, Shape{static_cast<int64_t>(values.size())}, values);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return Weight{std::move(name), type, Shape{static_cast<int64_t>(values.size())}, *t};
}

template <typename Out, typename In>
std::vector<Out> cast_values(DType from, const std::vector<In>& in, DType to) {
  auto r = apply(make(from, in), Cast{to});
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  if (!r.ok()) return {};
  EXPECT_EQ(std::get<DType>(r->type), to);
  EXPECT_EQ(r->data.dtype(), to);
  const auto v = r->data.template values<Out>();
  return {v.begin(), v.end()};
}

// The formats as their specifications define them (OCP 8-bit floating point, v1.0).
double e4m3_value(uint8_t c) {
  const int s = c >> 7, e = (c >> 3) & 0xf, m = c & 7;
  double v;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  if (e == 0) {
    v = (m / 8.0) * std::pow(2.0, -6);
  } else {
    v = (1 + m / 8.0) * std::pow(2.0, e - 7);
  }
  return s ? -v : v;
}
double e5m2_value(uint8_t c) {
  const int s = c >> 7, e = (c >> 2) & 0x1f, m = c & 3;
  double v;
  if (e == 31) {
    if (m) return std::numeric_limits<double>::quiet_NaN();
    v = std::numeric_limits<double>::infinity();
  } else if (e == 0) {
    v = (m / 4.0) * std::pow(2.0, -14);
  } else {
    v = (1 + m / 4.0) * std::pow(2.0, e - 15);
  }
  return s ? -v : v;
}

TEST(Cast, Fp8DecodesEveryCodeByTheFormula) {
  std::vector<uint8_t> codes(256);
  for (int i = 0; i < 256; ++i) codes[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
  for (DType t : {DType::kFloat8E4M3, DType::kFloat8E5M2}) {
    const auto f32 = cast_values<float>(t, codes, DType::kFloat32);
    const auto f64 = cast_values<double>(t, codes, DType::kFloat64);
    ASSERT_EQ(f32.size(), 256u);
    for (int i = 0; i < 256; ++i) {
      const double want =
          t == DType::kFloat8E4M3 ? e4m3_value(static_cast<uint8_t>(i)) : e5m2_value(static_cast<uint8_t>(i));
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(f32[static_cast<size_t>(i)])) << dtype_name(t) << " code " << i;
        EXPECT_TRUE(std::isnan(f64[static_cast<size_t>(i)])) << dtype_name(t) << " code " << i;
      } else {
        EXPECT_EQ(f32[static_cast<size_t>(i)], static_cast<float>(want)) << dtype_name(t) << " code " << i;
        EXPECT_EQ(f64[static_cast<size_t>(i)], want) << dtype_name(t) << " code " << i;
        EXPECT_EQ(std::signbit(f32[static_cast<size_t>(i)]), std::signbit(want)) << i;
      }
    }
  }
  // Landmarks.
  EXPECT_EQ(e4m3_value(0x7e), 448.0);
  EXPECT_EQ(e5m2_value(0x7b), 57344.0);
}

// The code an f32 must become: the nearest finite code by exhaustive search, ties to the even code;
// beyond the largest finite value E4M3 saturates and E5M2 rounds to infinity as IEEE does (the value
// halfway to the next power of two rounds up to infinity: its "code" 0x7c is even).
uint8_t nearest_code(float x, bool e4m3) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x)) return sign | (e4m3 ? 0x7f : 0x7e);
  const double a = std::fabs(static_cast<double>(x));
  if (!e4m3 && a >= 61440.0) return sign | 0x7c;
  const uint8_t max_code = e4m3 ? 0x7e : 0x7b;
  uint8_t best = 0;
  double best_err = std::numeric_limits<double>::infinity();
  for (uint8_t c = 0; c <= max_code; ++c) {
    const double err = std::fabs((e4m3 ? e4m3_value(c) : e5m2_value(c)) - a);
    if (err < best_err || (err == best_err && (c & 1) == 0)) {
      best = c;
      best_err = err;
    }
  }
  return sign | best;
}

TEST(Cast, F32ToFp8PicksTheNearestCodeTiesToEven) {
  std::vector<float> xs;
  // Every code's value, the midpoints between neighbours (ties) and values just around them.
  for (bool e4m3 : {true, false}) {
    const uint8_t max_code = e4m3 ? 0x7e : 0x7b;
    for (uint8_t c = 0; c <= max_code; ++c) {
      const double v = e4m3 ? e4m3_value(c) : e5m2_value(c);
      const double next = c < max_code ? (e4m3 ? e4m3_value(c + 1) : e5m2_value(c + 1)) : 2 * v;
      const float mid = static_cast<float>((v + next) / 2);
      for (float f : {static_cast<float>(v), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
        xs.push_back(f);
        xs.push_back(-f);
      }
    }
  }
  std::mt19937 rng(1);
  for (int i = 0; i < 20000; ++i) {
    // Random bit patterns across the whole f32 range, and random values in the formats' ranges.
    xs.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
    xs.push_back(
        std::ldexp(std::uniform_real_distribution<float>(-1, 1)(rng), static_cast<int>(rng() % 40) - 24));
  }
  for (float f : {0.0f, -0.0f, 1e-30f, 448.0f, 464.0f, 465.0f, 1e6f, 57344.0f, 61439.0f, 61440.0f, 1e9f}) {
    xs.push_back(f);
    xs.push_back(-f);
  }
  xs.push_back(std::numeric_limits<float>::infinity());
  xs.push_back(-std::numeric_limits<float>::infinity());
  xs.push_back(std::numeric_limits<float>::quiet_NaN());
  xs.push_back(-std::numeric_limits<float>::quiet_NaN());
  for (bool e4m3 : {true, false}) {
    const auto got =
        cast_values<uint8_t>(DType::kFloat32, xs, e4m3 ? DType::kFloat8E4M3 : DType::kFloat8E5M2);
    ASSERT_EQ(got.size(), xs.size());
    for (size_t i = 0; i < xs.size(); ++i) {
      uint8_t want = nearest_code(xs[i], e4m3);
      if (e4m3 && std::isinf(xs[i])) want = std::signbit(xs[i]) ? 0xfe : 0x7e;  // the contract: saturate
      ASSERT_EQ(got[i], want) << (e4m3 ? "e4m3 " : "e5m2 ") << xs[i] << " (bits 0x" << std::hex
                              << std::bit_cast<uint32_t>(xs[i]) << ")";
    }
  }
}

TEST(Cast, F16AndBf16KnownBitPatterns) {
  const std::vector<float> xs = {1.0f,
                                 -2.0f,
                                 65504.0f,
                                 65519.99f,
                                 65520.0f,  // halfway to 2^16: ties to even = infinity
                                 std::ldexp(1.0f, -24),
                                 std::ldexp(1.0f, -25),         // halfway to the smallest subnormal: to 0
                                 std::ldexp(1.5f, -25),         // above halfway: the smallest subnormal
                                 1.0f + std::ldexp(1.0f, -11),  // tie: even (1.0)
                                 1.0f + 3 * std::ldexp(1.0f, -11),
                                 0.1f,
                                 -0.0f,
                                 std::numeric_limits<float>::infinity()};
  const std::vector<uint16_t> f16 = {0x3c00, 0xc000, 0x7bff, 0x7bff, 0x7c00, 0x0001, 0x0000,
                                     0x0001, 0x3c00, 0x3c02, 0x2e66, 0x8000, 0x7c00};
  EXPECT_EQ(cast_values<uint16_t>(DType::kFloat32, xs, DType::kFloat16), f16);
  const std::vector<float> bx = {1.0f,
                                 1.0f + std::ldexp(1.0f, -8),
                                 1.0f + 3 * std::ldexp(1.0f, -8),
                                 std::bit_cast<float>(0x40490fdbu),
                                 std::numeric_limits<float>::max(),
                                 -0.0f};
  const std::vector<uint16_t> bf16 = {0x3f80, 0x3f80, 0x3f82, 0x4049, 0x7f80, 0x8000};
  EXPECT_EQ(cast_values<uint16_t>(DType::kFloat32, bx, DType::kBFloat16), bf16);
  // Back to f32 exactly.
  const auto back = cast_values<float>(DType::kFloat16, f16, DType::kFloat32);
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[2], 65504.0f);
  EXPECT_EQ(back[5], std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(back[4]));
  const auto bback = cast_values<float>(DType::kBFloat16, bf16, DType::kFloat32);
  EXPECT_EQ(std::bit_cast<uint32_t>(bback[3]), 0x40490000u);
  // NaN stays NaN.
  const auto nan16 =
      cast_values<uint16_t>(DType::kFloat32, std::vector<float>{std::nanf("")}, DType::kFloat16);
  EXPECT_EQ(nan16[0] & 0x7c00, 0x7c00);
  EXPECT_NE(nan16[0] & 0x3ff, 0);
}

TEST(Cast, F16MatchesGgmlOnRandomValues) {
  std::mt19937 rng(2);
  std::vector<float> xs;
  for (int i = 0; i < 100000; ++i) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (!std::isnan(f)) xs.push_back(f);
    xs.push_back(
        std::ldexp(std::uniform_real_distribution<float>(-1, 1)(rng), static_cast<int>(rng() % 50) - 30));
  }
  const auto got = cast_values<uint16_t>(DType::kFloat32, xs, DType::kFloat16);
  ASSERT_EQ(got.size(), xs.size());
  const auto back = cast_values<float>(DType::kFloat16, got, DType::kFloat32);
  for (size_t i = 0; i < xs.size(); ++i) {
    ASSERT_EQ(got[i], ggml_fp32_to_fp16(xs[i])) << xs[i];
    ASSERT_EQ(std::bit_cast<uint32_t>(back[i]), std::bit_cast<uint32_t>(ggml_fp16_to_fp32(got[i]))) << xs[i];
  }
}

TEST(Cast, RoundsOnceFromWideSources) {
  // f64 -> f16: 1 + 2^-11 + 2^-40 is just above the tie, so it rounds up (via f32 it would tie to even).
  const auto h = cast_values<uint16_t>(DType::kFloat64,
                                       std::vector<double>{1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)},
                                       DType::kFloat16);
  EXPECT_EQ(h[0], 0x3c01);
  // i64 -> bf16: 2^60 + 2^52 + 1 is just above the tie between 2^60 and 2^60 (1 + 2^-7); through a plain
  // int -> double conversion it would become the tie itself and round down.
  const int64_t big = (int64_t{1} << 60) + (int64_t{1} << 52) + 1;
  EXPECT_EQ(cast_values<uint16_t>(DType::kInt64, std::vector<int64_t>{big}, DType::kBFloat16)[0], 0x5d81);
  EXPECT_EQ(
      cast_values<uint16_t>(DType::kInt64, std::vector<int64_t>{(int64_t{1} << 60) + (int64_t{1} << 52)},
                            DType::kBFloat16)[0],
      0x5d80);
  // u64 max -> f32 rounds to 2^64; int -> f64 exact where it can be.
  EXPECT_EQ(cast_values<float>(DType::kUInt64, std::vector<uint64_t>{UINT64_MAX}, DType::kFloat32)[0],
            0x1p64f);
  EXPECT_EQ(
      cast_values<double>(DType::kInt64, std::vector<int64_t>{-(int64_t{1} << 53) - 1}, DType::kFloat64)[0],
      -0x1p53);
  EXPECT_EQ(cast_values<uint16_t>(DType::kInt32, std::vector<int32_t>{65519, 65520, -3}, DType::kFloat16),
            (std::vector<uint16_t>{0x7bff, 0x7c00, 0xc200}));
  // f32 -> f64 -> f32 is the identity.
  const std::vector<float> xs = {0.1f, -3e38f, 1e-45f};
  EXPECT_EQ(cast_values<float>(DType::kFloat64, cast_values<double>(DType::kFloat32, xs, DType::kFloat64),
                               DType::kFloat32),
            xs);
}

TEST(Cast, IntegersTruncateAndCheckRanges) {
  EXPECT_EQ(cast_values<int8_t>(DType::kFloat32, std::vector<float>{127.9f, -128.7f, -0.9f, 2.5f, -2.5f},
                                DType::kInt8),
            (std::vector<int8_t>{127, -128, 0, 2, -2}));
  EXPECT_EQ(cast_values<uint8_t>(DType::kFloat32, std::vector<float>{-0.5f, 255.99f}, DType::kUInt8),
            (std::vector<uint8_t>{0, 255}));
  EXPECT_EQ(cast_values<int64_t>(DType::kFloat64, std::vector<double>{-0x1p63, 0x1p62}, DType::kInt64),
            (std::vector<int64_t>{INT64_MIN, int64_t{1} << 62}));
  EXPECT_EQ(cast_values<uint64_t>(DType::kFloat64, std::vector<double>{0x1p63 + 0x1p62}, DType::kUInt64),
            (std::vector<uint64_t>{(uint64_t{3} << 62)}));
  EXPECT_EQ(cast_values<int16_t>(DType::kUInt64, std::vector<uint64_t>{0, 32767}, DType::kInt16),
            (std::vector<int16_t>{0, 32767}));
  EXPECT_EQ(cast_values<uint32_t>(DType::kInt8, std::vector<int8_t>{0, 127}, DType::kUInt32),
            (std::vector<uint32_t>{0, 127}));
  EXPECT_EQ(cast_values<int64_t>(DType::kUInt32, std::vector<uint32_t>{UINT32_MAX}, DType::kInt64),
            (std::vector<int64_t>{UINT32_MAX}));

  struct Bad {
    Weight w;
    DType to;
    std::string message;
  };
  const std::vector<Bad> bad = {
      {make(DType::kFloat32, std::vector<float>{1, 128}, "x"), DType::kInt8,
       "cast i8 on 'x' [2]: element 1 (128) is out of the range of i8"},
      {make(DType::kFloat32, std::vector<float>{std::nanf("")}, "x"), DType::kInt32,
       "cast i32 on 'x' [1]: element 0 is NaN, which no i32 can hold"},
      {make(DType::kFloat32, std::vector<float>{-1}, "x"), DType::kUInt8,
       "cast u8 on 'x' [1]: element 0 (-1) is out of the range of u8"},
      {make(DType::kFloat64, std::vector<double>{0x1p63}, "x"), DType::kInt64,
       "cast i64 on 'x' [1]: element 0 (9.2233720368547758e+18) is out of the range of i64"},
      {make(DType::kFloat32, std::vector<float>{std::numeric_limits<float>::infinity()}, "x"), DType::kUInt64,
       "cast u64 on 'x' [1]: element 0 (inf) is out of the range of u64"},
      {make(DType::kInt64, std::vector<int64_t>{300}, "x"), DType::kUInt8,
       "cast u8 on 'x' [1]: element 0 (300) does not fit in u8"},
      {make(DType::kInt8, std::vector<int8_t>{5, -1}, "x"), DType::kUInt64,
       "cast u64 on 'x' [2]: element 1 (-1) does not fit in u64"},
      {make(DType::kUInt64, std::vector<uint64_t>{UINT64_MAX}, "x"), DType::kInt64,
       "cast i64 on 'x' [1]: element 0 (18446744073709551615) does not fit in i64"},
  };
  for (const Bad& b : bad) {
    auto r = apply(b.w, Cast{b.to});
    ASSERT_FALSE(r.ok()) << b.message;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), b.message);
  }
}

TEST(Cast, BoolIsZeroOrOne) {
  EXPECT_EQ(cast_values<uint8_t>(DType::kFloat32,
                                 std::vector<float>{0.0f, -0.0f, 2.5f, std::nanf(""), -1e-40f}, DType::kBool),
            (std::vector<uint8_t>{0, 0, 1, 1, 1}));
  EXPECT_EQ(cast_values<uint8_t>(DType::kInt32, std::vector<int32_t>{0, -7, 256}, DType::kBool),
            (std::vector<uint8_t>{0, 1, 1}));
  EXPECT_EQ(cast_values<float>(DType::kBool, std::vector<uint8_t>{0, 1}, DType::kFloat32),
            (std::vector<float>{0, 1}));
  EXPECT_EQ(cast_values<int64_t>(DType::kBool, std::vector<uint8_t>{1, 0}, DType::kInt64),
            (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(cast_values<uint8_t>(DType::kBool, std::vector<uint8_t>{1, 0}, DType::kFloat8E4M3),
            (std::vector<uint8_t>{0x38, 0}));
}

TEST(Cast, EveryPairRoundTripsSmallIntegers) {
  // 0..5 is exact in every type: any cast chain a -> b -> a must give the values back.
  const std::vector<DType> types = {DType::kFloat32,    DType::kFloat16,    DType::kBFloat16, DType::kFloat64,
                                    DType::kFloat8E4M3, DType::kFloat8E5M2, DType::kInt8,     DType::kInt16,
                                    DType::kInt32,      DType::kInt64,      DType::kUInt8,    DType::kUInt16,
                                    DType::kUInt32,     DType::kUInt64};
  const std::vector<float> base = {0, 1, 2, 3, 4, 5};
  for (DType a : types) {
    auto wa = apply(make(DType::kFloat32, base), Cast{a});
    ASSERT_TRUE(wa.ok()) << dtype_name(a);
    for (DType b : types) {
      auto wb = apply(*wa, Cast{b});
      ASSERT_TRUE(wb.ok()) << dtype_name(a) << "->" << dtype_name(b);
      auto back = apply(*wb, Cast{DType::kFloat32});
      ASSERT_TRUE(back.ok());
      const auto v = back->data.values<float>();
      EXPECT_EQ(std::vector<float>(v.begin(), v.end()), base) << dtype_name(a) << "->" << dtype_name(b);
    }
  }
}

TEST(Cast, ParseAndErrors) {
  auto c = parse_cast("f16");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(std::get<Cast>(*c).to, DType::kFloat16);
  EXPECT_EQ(describe(*c), "cast f16");
  ASSERT_TRUE(parse_cast("f8e4m3").ok());
  EXPECT_EQ(std::get<Cast>(*parse_cast("bfloat16")).to, DType::kBFloat16);
  EXPECT_FALSE(parse_cast("q8_0").ok());
  EXPECT_FALSE(parse_cast("string").ok());
  EXPECT_FALSE(parse_cast("").ok());
  // A block-quantised weight must be dequantised first.
  auto bytes = Tensor::allocate(DType::kUInt8, Shape{34});
  ASSERT_TRUE(bytes.ok());
  auto r = apply(Weight{"q", model::GgmlType::kQ8_0, Shape{32}, *bytes}, Cast{DType::kFloat16});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "cast f16 on 'q' [32]: the tensor is block-quantised (q8_0); dequantize it first");
}

}  // namespace
}  // namespace gantry::weights
