// Q8_0 / Q4_0 quantisation against ggml's own ggml_quantize_chunk (byte for byte), and dequantisation of
// every ggml block type against ggml's to_float.
#include <ggml.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gantry/weights/transform.h"
#include "weights/quantize_kernels.h"

namespace gantry::weights {
namespace {

using detail::kQK;

std::vector<uint8_t> ggml_quantize(ggml_type type, const std::vector<float>& x, int64_t row) {
  std::vector<uint8_t> out(ggml_row_size(type, row) * (x.size() / static_cast<size_t>(row)), 0xAA);
  const size_t n =
      ggml_quantize_chunk(type, x.data(), out.data(), 0, static_cast<int64_t>(x.size()) / row, row, nullptr);
  EXPECT_EQ(n, out.size());
  return out;
}

// Every kernel we have for `type` on this machine.
std::vector<std::pair<const char*, void (*)(const float*, uint8_t*, int64_t)>> kernels(ggml_type type) {
  std::vector<std::pair<const char*, void (*)(const float*, uint8_t*, int64_t)>> k;
  if (type == GGML_TYPE_Q8_0) {
    k.push_back({"dispatch", detail::quantize_q8_0});
    k.push_back({"scalar", detail::quantize_q8_0_scalar});
    k.push_back({"portable", detail::quantize_q8_0_portable});
    if (detail::cpu_has_avx2()) k.push_back({"avx2", detail::quantize_q8_0_avx2});
  } else {
    k.push_back({"dispatch", detail::quantize_q4_0});
    k.push_back({"scalar", detail::quantize_q4_0_scalar});
    k.push_back({"portable", detail::quantize_q4_0_portable});
    if (detail::cpu_has_avx2()) k.push_back({"avx2", detail::quantize_q4_0_avx2});
  }
  return k;
}

void expect_identical(const std::vector<float>& x, const char* what) {
  for (ggml_type type : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0}) {
    const auto want = ggml_quantize(type, x, kQK);
    for (const auto& [name, fn] : kernels(type)) {
      std::vector<uint8_t> got(want.size(), 0x55);
      fn(x.data(), got.data(), static_cast<int64_t>(x.size()));
      ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size()), 0)
          << what << ": " << ggml_type_name(type) << " kernel " << name
          << " differs from ggml_quantize_chunk";
    }
  }
}

std::vector<float> random_normal(size_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

TEST(Quantize, RandomDataMatchesGgml) {
  expect_identical(random_normal(32 * 1024, 1.0f, 1), "normal(0,1)");
  expect_identical(random_normal(32 * 256, 0.02f, 2), "normal(0,0.02)");
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.0f, 5.0f);
  std::vector<float> pos(32 * 256);
  for (float& v : pos) v = u(rng);
  expect_identical(pos, "uniform(0,5) (all positive)");
  for (float& v : pos) v = -v;
  expect_identical(pos, "all negative");
}

TEST(Quantize, EdgeValuesMatchGgml) {
  expect_identical(std::vector<float>(32 * 8, 0.0f), "zeros");
  expect_identical(std::vector<float>(32 * 8, -0.0f), "negative zeros");
  expect_identical(random_normal(32 * 64, 1e-30f, 4), "tiny");
  expect_identical(random_normal(32 * 64, 1e30f, 5), "huge");
  expect_identical(random_normal(32 * 64, 1e38f, 6), "huge, some overflowing the scale");
  // Denormals: the scale's inverse overflows to infinity.
  std::vector<float> den(32 * 16);
  for (size_t i = 0; i < den.size(); ++i)
    den[i] = std::numeric_limits<float>::denorm_min() * static_cast<float>(static_cast<int>(i % 37) - 18);
  expect_identical(den, "denormals");
  // Mixed: each block a different regime, including a single non-zero value and equal +-max ties.
  std::vector<float> mixed = random_normal(32 * 32, 3.0f, 7);
  for (int j = 0; j < 32; ++j) mixed[32 + j] = j == 17 ? -2.5f : 0.0f;
  for (int j = 0; j < 32; ++j) mixed[64 + j] = (j % 2 ? 1.0f : -1.0f) * static_cast<float>(j % 5);
  for (int j = 0; j < 32; ++j) mixed[96 + j] = static_cast<float>(j) - 15.5f;  // exact .5 ties after scaling
  for (int j = 0; j < 32; ++j) mixed[128 + j] = static_cast<float>(j - 16) * 0.5f;
  for (int j = 0; j < 32; ++j) mixed[160 + j] = j == 0 ? 127.0f : static_cast<float>(j) + 0.5f;  // id == 1
  for (int j = 0; j < 32; ++j) mixed[192 + j] = j == 3 ? -8.0f : static_cast<float>(j % 16) - 7.5f;
  expect_identical(mixed, "mixed");
}

TEST(Quantize, NonFiniteValuesMatchGgml) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = random_normal(32 * 8, 1.0f, 8);
  x[3] = nan;                                     // NaN in the middle of block 0
  x[32 + 31] = nan;                               // NaN last in block 1 (ggml's running MAX ends NaN)
  x[64 + 5] = inf;                                // +inf in block 2
  x[96 + 0] = -inf;                               // -inf first in block 3
  for (int j = 0; j < 32; ++j) x[128 + j] = nan;  // all NaN
  x[160] = inf;
  x[161] = -inf;
  x[200] = std::numeric_limits<float>::max();
  x[201] = -std::numeric_limits<float>::max();
  expect_identical(x, "NaN and infinities");
}

TEST(Quantize, RandomBitPatternsMatchGgml) {
  // Any f32 bit pattern (NaN payloads, infinities, denormals, huge and tiny magnitudes mixed in a block),
  // and blocks of one random exponent band each.
  std::mt19937 rng(10);
  std::vector<float> x(32 * 2048);
  for (float& v : x) v = std::bit_cast<float>(static_cast<uint32_t>(rng()));
  expect_identical(x, "random bit patterns");
  for (size_t b = 0; b < x.size() / 32; ++b) {
    const int e = static_cast<int>(rng() % 300) - 160;
    for (size_t j = 0; j < 32; ++j)
      x[b * 32 + j] = std::ldexp(std::uniform_real_distribution<float>(-1, 1)(rng), e);
  }
  expect_identical(x, "random exponent bands");
}

TEST(Quantize, ManyRowsAndTheTransformMatchGgml) {
  const int64_t rows = 7, cols = 96;
  std::vector<float> x = random_normal(static_cast<size_t>(rows * cols), 0.7f, 9);
  auto t = Tensor::from_values(DType::kFloat32, Shape{rows, cols}, x);
  ASSERT_TRUE(t.ok());
  const Weight w{"blk.0.ffn_up.weight", DType::kFloat32, Shape{rows, cols}, *t};
  for (auto [gt, type] : {std::pair{GGML_TYPE_Q8_0, model::GgmlType::kQ8_0},
                          std::pair{GGML_TYPE_Q4_0, model::GgmlType::kQ4_0}}) {
    auto q = apply(w, Quantize{type});
    ASSERT_TRUE(q.ok()) << q.status().to_string();
    EXPECT_TRUE(q->quantised());
    EXPECT_EQ(q->shape, (Shape{rows, cols}));
    EXPECT_EQ(q->name, w.name);
    const auto want = ggml_quantize(gt, x, cols);
    ASSERT_EQ(q->data.byte_size(), want.size());
    EXPECT_EQ(std::memcmp(q->data.data(), want.data(), want.size()), 0);

    // Round trip: our dequantisation equals ggml's to_float on ggml's bytes, and is close to the input.
    auto back = apply(*q, Dequantize{});
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    ASSERT_EQ(std::get<DType>(back->type), DType::kFloat32);
    std::vector<float> ref(x.size());
    ggml_get_type_traits(gt)->to_float(want.data(), ref.data(), static_cast<int64_t>(x.size()));
    ASSERT_EQ(std::memcmp(back->data.data(), ref.data(), ref.size() * 4), 0);
    const auto vals = back->data.values<float>();
    for (size_t i = 0; i < x.size(); ++i) {
      const float tol = gt == GGML_TYPE_Q8_0 ? 0.03f : 0.4f;  // half a step of the block's scale, roughly
      EXPECT_NEAR(vals[i], x[i], tol) << i;
    }
  }
}

TEST(Quantize, OtherFloatInputGoesThroughF32) {
  // bf16 input: the same bytes as quantising its exact f32 values.
  std::vector<float> x = random_normal(2 * 64, 1.0f, 11);
  std::vector<uint16_t> bf(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    bf[i] = static_cast<uint16_t>(std::bit_cast<uint32_t>(x[i]) >> 16);
    x[i] = std::bit_cast<float>(static_cast<uint32_t>(bf[i]) << 16);
  }
  auto t = Tensor::from_values(DType::kBFloat16, Shape{2, 64}, bf);
  ASSERT_TRUE(t.ok());
  auto q = apply(Weight{"bf", DType::kBFloat16, Shape{2, 64}, *t}, Quantize{model::GgmlType::kQ8_0});
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  const auto want = ggml_quantize(GGML_TYPE_Q8_0, x, 64);
  ASSERT_EQ(q->data.byte_size(), want.size());
  EXPECT_EQ(std::memcmp(q->data.data(), want.data(), want.size()), 0);
}

// Dequantisation of every ggml block type: ggml-quantised data where ggml can quantise without an
// importance matrix, arbitrary bytes otherwise; compared with ggml's to_float.
TEST(Quantize, DequantizeEveryBlockTypeAsGgml) {
  int tested = 0;
  for (uint32_t id = 0; id < 64; ++id) {
    const auto traits = model::ggml_type_traits(id);
    if (!traits || traits->block_size <= 1) continue;
    const auto* gg = ggml_get_type_traits(static_cast<ggml_type>(id));
    if (!gg || !gg->to_float) continue;
    const int64_t cols = 2 * static_cast<int64_t>(traits->block_size) * (traits->block_size < 256 ? 8 : 1);
    const int64_t rows = 3;
    std::vector<uint8_t> bytes(static_cast<size_t>(rows * cols / traits->block_size * traits->type_size));
    const auto x = random_normal(static_cast<size_t>(rows * cols), 1.0f, 100 + id);
    // (ggml's iq1/iq2/iq3 quantisers first build large search tables, seconds each: random bytes for those.)
    const bool slow_init = traits->name.starts_with("iq") && !traits->name.starts_with("iq4");
    if (!slow_init && !ggml_quantize_requires_imatrix(static_cast<ggml_type>(id))) {
      ggml_quantize_chunk(static_cast<ggml_type>(id), x.data(), bytes.data(), 0, rows, cols, nullptr);
    } else {
      std::mt19937 rng(id);
      for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    }
    auto t = Tensor::from_values(DType::kUInt8, Shape{static_cast<int64_t>(bytes.size())}, bytes);
    ASSERT_TRUE(t.ok());
    const Weight w{"t", traits->type, Shape{rows, cols}, *t};
    auto out = apply(w, Dequantize{});
    ASSERT_TRUE(out.ok()) << traits->name << ": " << out.status().to_string();
    std::vector<float> ref(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r)
      gg->to_float(bytes.data() + r * (cols / traits->block_size * traits->type_size), ref.data() + r * cols,
                   cols);
    EXPECT_EQ(std::memcmp(out->data.data(), ref.data(), ref.size() * 4), 0) << traits->name;
    ++tested;
  }
  EXPECT_GE(tested, 20);
}

TEST(Quantize, ErrorsNameTheTransformAndTensor) {
  auto i32 = Tensor::allocate(DType::kInt32, Shape{2, 32});
  ASSERT_TRUE(i32.ok());
  auto r = apply(Weight{"a.weight", DType::kInt32, Shape{2, 32}, *i32}, Quantize{model::GgmlType::kQ8_0});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "quantize q8_0 on 'a.weight' [2,32]: quantisation takes float input, this tensor is i32 (cast it "
            "to f32 "
            "first)");

  auto f32 = Tensor::allocate(DType::kFloat32, Shape{2, 33});
  ASSERT_TRUE(f32.ok());
  r = apply(Weight{"b", DType::kFloat32, Shape{2, 33}, *f32}, Quantize{model::GgmlType::kQ4_0});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(
      r.status().message().find("quantize q4_0 on 'b' [2,33]: the last dimension must be a multiple of 32"),
      std::string::npos)
      << r.status().message();

  auto f32b = Tensor::allocate(DType::kFloat32, Shape{64});
  ASSERT_TRUE(f32b.ok());
  r = apply(Weight{"c", DType::kFloat32, Shape{64}, *f32b}, Quantize{model::GgmlType::kQ6_K});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);

  r = apply(Weight{"c", DType::kFloat32, Shape{64}, *f32b}, Dequantize{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "dequantize on 'c' [64]: the tensor is not block-quantised");

  auto few = Tensor::allocate(DType::kUInt8, Shape{10});
  ASSERT_TRUE(few.ok());
  r = apply(Weight{"d", model::GgmlType::kQ8_0, Shape{64}, *few}, Dequantize{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "dequantize on 'd' [64]: holds 10 bytes, q8_0 [64] needs 68");

  // A type id neither ggml nor our table knows.
  r = apply(Weight{"e", static_cast<model::GgmlType>(200), Shape{64}, *few}, Dequantize{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);

  // Layout transformations refuse block data.
  r = apply(Weight{"d", model::GgmlType::kQ8_0, Shape{64}, *few}, Transpose{{0}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("block-quantised (q8_0); dequantize it first"), std::string::npos);
}

TEST(Quantize, ParseQuantize) {
  auto q = parse_quantize("Q8_0");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(std::get<Quantize>(*q).to, model::GgmlType::kQ8_0);
  q = parse_quantize("q4_0");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(std::get<Quantize>(*q).to, model::GgmlType::kQ4_0);
  EXPECT_EQ(describe(*q), "quantize q4_0");
  EXPECT_FALSE(parse_quantize("q6_K").ok());
  EXPECT_FALSE(parse_quantize("f16").ok());
  EXPECT_FALSE(parse_quantize("").ok());
}

}  // namespace
}  // namespace gantry::weights
