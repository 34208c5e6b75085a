// Layout transformations (transpose, slice, reshape), scale, parsing, describe() and apply_all(): against
// hand-computed results, against numpy (tests/weights/numpy_layout.py) and on every error path.
#include "gantry/weights/transform.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <vector>

#include "core/temp_dir.h"

namespace gantry::weights {
namespace {

template <typename T>
Weight make(DType type, const Shape& shape, const std::vector<T>& values, std::string name = "w") {
  auto t = Tensor::from_values(type, shape, values);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return Weight{std::move(name), type, shape, *t};
}

Weight iota_f32(const Shape& shape, std::string name = "w") {
  std::vector<float> v(static_cast<size_t>(*shape.element_count()));
  std::iota(v.begin(), v.end(), 0.0f);
  return make(DType::kFloat32, shape, v, std::move(name));
}

template <typename T>
std::vector<T> values_of(const Result<Weight>& w) {
  EXPECT_TRUE(w.ok()) << w.status().to_string();
  if (!w.ok()) return {};
  const auto v = w->data.template values<T>();
  return {v.begin(), v.end()};
}

TEST(Transform, TransposeByHand) {
  // [[0,1,2],[3,4,5]] -> [[0,3],[1,4],[2,5]]
  auto r = apply(iota_f32(Shape{2, 3}), Transpose{{1, 0}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shape, (Shape{3, 2}));
  EXPECT_EQ(r->data.shape(), (Shape{3, 2}));
  EXPECT_EQ(values_of<float>(r), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  // Rank 3, u16: out[i][j][k] = in[j][k][i] for perm (2,0,1).
  std::vector<uint16_t> v(24);
  std::iota(v.begin(), v.end(), uint16_t{0});
  auto r3 = apply(make(DType::kUInt16, Shape{2, 3, 4}, v), Transpose{{2, 0, 1}});
  ASSERT_TRUE(r3.ok());
  EXPECT_EQ(r3->shape, (Shape{4, 2, 3}));
  const auto got = values_of<uint16_t>(r3);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k) EXPECT_EQ(got[static_cast<size_t>(i * 6 + j * 3 + k)], j * 12 + k * 4 + i);
  // Identity and rank 0.
  EXPECT_EQ(values_of<float>(apply(iota_f32(Shape{2, 3}), Transpose{{0, 1}})),
            (std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(values_of<float>(apply(iota_f32(Shape{}), Transpose{{}})), (std::vector<float>{0}));
}

TEST(Transform, SliceByHand) {
  const Weight w = iota_f32(Shape{10});
  auto slice = [&](std::vector<SliceDim> dims) { return values_of<float>(apply(w, Slice{dims})); };
  EXPECT_EQ(slice({{2, 8, 3}}), (std::vector<float>{2, 5}));
  EXPECT_EQ(slice({{-3}}), (std::vector<float>{7, 8, 9}));
  EXPECT_EQ(slice({{0, -8}}), (std::vector<float>{0, 1}));
  EXPECT_EQ(slice({{-100, 100, 4}}), (std::vector<float>{0, 4, 8}));
  EXPECT_EQ(slice({{5, 2}}), (std::vector<float>{}));
  EXPECT_EQ(slice({{9, 10, 7}}), (std::vector<float>{9}));
  EXPECT_EQ(slice({{1, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max()}}),
            (std::vector<float>{1}));
  EXPECT_EQ(slice({{std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), 9}}),
            (std::vector<float>{0, 9}));
  // 2-D: rows 1.. and every second column; listed dims only, the rest kept whole.
  auto r = apply(iota_f32(Shape{3, 4}), Slice{{{1}, {0, std::numeric_limits<int64_t>::max(), 2}}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shape, (Shape{2, 2}));
  EXPECT_EQ(values_of<float>(r), (std::vector<float>{4, 6, 8, 10}));
  r = apply(iota_f32(Shape{3, 4}), Slice{{{-1}}});
  EXPECT_EQ(r->shape, (Shape{1, 4}));
  EXPECT_EQ(values_of<float>(r), (std::vector<float>{8, 9, 10, 11}));
  auto empty = apply(iota_f32(Shape{3, 4}), Slice{{{3}}});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->shape, (Shape{0, 4}));
}

TEST(Transform, ReshapeAndScaleByHand) {
  auto r = apply(iota_f32(Shape{2, 6}), Reshape{{4, -1}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shape, (Shape{4, 3}));
  EXPECT_EQ(values_of<float>(r), (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  r = apply(iota_f32(Shape{2, 6}), Reshape{{12}});
  EXPECT_EQ(r->shape, (Shape{12}));
  r = apply(iota_f32(Shape{0, 3}), Reshape{{-1, 6}});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->shape, (Shape{0, 6}));

  EXPECT_EQ(values_of<float>(apply(iota_f32(Shape{3}), Scale{0.5})), (std::vector<float>{0, 0.5f, 1}));
  EXPECT_EQ(values_of<double>(apply(make(DType::kFloat64, Shape{2}, std::vector<double>{1, -3}), Scale{-2})),
            (std::vector<double>{-2, 6}));
  // bf16: 1.5 * 3 = 4.5 exactly (0x4090).
  EXPECT_EQ(
      values_of<uint16_t>(apply(make(DType::kBFloat16, Shape{1}, std::vector<uint16_t>{0x3fc0}), Scale{3})),
      (std::vector<uint16_t>{0x4090}));
  // f8e4m3: 448 * 2 saturates.
  EXPECT_EQ(
      values_of<uint8_t>(apply(make(DType::kFloat8E4M3, Shape{1}, std::vector<uint8_t>{0x7e}), Scale{2})),
      (std::vector<uint8_t>{0x7e}));
}

TEST(Transform, InputIsNeverModified) {
  const Weight w = iota_f32(Shape{2, 3});
  for (const Transform& t : std::vector<Transform>{Transpose{{1, 0}}, Slice{{{1}}}, Reshape{{3, 2}}, Scale{4},
                                                   Cast{DType::kFloat16}}) {
    auto r = weights::apply(w, t);  // qualified: a Transform argument brings std::apply in by ADL
    ASSERT_TRUE(r.ok()) << describe(t);
    EXPECT_NE(r->data.data(), w.data.data()) << describe(t);
    EXPECT_EQ(values_of<float>(Result<Weight>(w)), (std::vector<float>{0, 1, 2, 3, 4, 5})) << describe(t);
  }
}

TEST(Transform, ApplyAllChains) {
  // f32 [2,3] -> f16 -> transpose -> slice rows 1: -> f32 -> scale 2
  auto r = apply_all(iota_f32(Shape{2, 3}, "chain"), {Cast{DType::kFloat16}, Transpose{{1, 0}}, Slice{{{1}}},
                                                      Cast{DType::kFloat32}, Scale{2}});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->name, "chain");
  EXPECT_EQ(r->shape, (Shape{2, 2}));
  EXPECT_EQ(values_of<float>(r), (std::vector<float>{2, 8, 4, 10}));
  // The first failing step's error comes back.
  auto bad = apply_all(iota_f32(Shape{2, 3}, "chain"), {Cast{DType::kFloat16}, Transpose{{0}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "transpose 0 on 'chain' [2,3]: the permutation has 1 entries but the tensor has rank 2");
  auto none = apply_all(iota_f32(Shape{2}), {});
  EXPECT_EQ(values_of<float>(none), (std::vector<float>{0, 1}));
}

TEST(Transform, ErrorsNameTheTransformAndTensor) {
  const Weight w = iota_f32(Shape{64, 64}, "blk.0.attn_q.weight");
  struct Case {
    Transform t;
    std::string message;
  };
  const std::vector<Case> cases = {
      {Slice{{{0, 10, 1}, {0, std::numeric_limits<int64_t>::max(), 0}}},
       "slice 0:10,::0 on 'blk.0.attn_q.weight' [64,64]: step must be > 0 (dimension 1 has step 0)"},
      {Slice{{{0, 10, -1}}},
       "slice 0:10:-1 on 'blk.0.attn_q.weight' [64,64]: step must be > 0 (dimension 0 has step -1)"},
      {Slice{{{}, {}, {}}},
       "slice :,:,: on 'blk.0.attn_q.weight' [64,64]: 3 slice parts for a tensor of rank 2"},
      {Transpose{{0, 0}},
       "transpose 0,0 on 'blk.0.attn_q.weight' [64,64]: not a permutation of 0..1 (entry 0)"},
      {Transpose{{0, 2}},
       "transpose 0,2 on 'blk.0.attn_q.weight' [64,64]: not a permutation of 0..1 (entry 2)"},
      {Transpose{{1, 0, 2}},
       "transpose 1,0,2 on 'blk.0.attn_q.weight' [64,64]: the permutation has 3 entries but the tensor has "
       "rank 2"},
      {Reshape{{-1, -1}}, "reshape -1,-1 on 'blk.0.attn_q.weight' [64,64]: at most one dimension may be -1"},
      {Reshape{{100, 40}},
       "reshape 100,40 on 'blk.0.attn_q.weight' [64,64]: the new shape has 4000 elements, the tensor 4096"},
      {Reshape{{-1, 3}},
       "reshape -1,3 on 'blk.0.attn_q.weight' [64,64]: cannot infer the -1 dimension: 4096 elements are not "
       "a "
       "multiple of 3"},
      {Reshape{{-2, 64}}, "reshape -2,64 on 'blk.0.attn_q.weight' [64,64]: dimension 0 is negative (-2)"},
  };
  for (const Case& c : cases) {
    auto r = weights::apply(w, c.t);
    ASSERT_FALSE(r.ok()) << c.message;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), c.message);
  }
  auto s = apply(make(DType::kInt32, Shape{2}, std::vector<int32_t>{1, 2}, "ids"), Scale{2});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "scale 2 on 'ids' [2]: scale applies to float tensors only, this one is i32 (cast it to a float "
            "type first)");
  // Data that does not match the weight's declared type.
  Weight lie = iota_f32(Shape{2, 2}, "lie");
  lie.type = DType::kFloat16;
  auto l = apply(lie, Transpose{{1, 0}});
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().message(),
            "transpose 1,0 on 'lie' [2,2]: its data is f32 [2,2], not the weight's f16 [2,2]");
  // Block-quantised data: reshape keeps whole blocks along the last dimension, else refuses.
  auto blocks = Tensor::allocate(DType::kUInt8, Shape{4 * 34});
  ASSERT_TRUE(blocks.ok());
  const Weight q{"q", model::GgmlType::kQ8_0, Shape{2, 64}, *blocks};
  auto ok = apply(q, Reshape{{4, 32}});
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(ok->shape, (Shape{4, 32}));
  EXPECT_TRUE(ok->quantised());
  auto no = apply(q, Reshape{{8, 16}});
  ASSERT_FALSE(no.ok());
  EXPECT_EQ(no.status().message(),
            "reshape 8,16 on 'q' [2,64]: a q8_0 weight's last dimension must stay a multiple of 32 "
            "(dequantize first)");
  auto sl = apply(q, Slice{{{0, 1}}});
  ASSERT_FALSE(sl.ok());
  EXPECT_EQ(sl.status().message(),
            "slice 0:1 on 'q' [2,64]: the tensor is block-quantised (q8_0); dequantize it first");
}

TEST(Transform, ParseAndDescribe) {
  auto t = parse_transpose("1,0");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(std::get<Transpose>(*t).perm, (std::vector<int>{1, 0}));
  EXPECT_EQ(describe(*t), "transpose 1,0");
  auto r = parse_reshape("4,-1");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(std::get<Reshape>(*r).shape, (std::vector<int64_t>{4, -1}));
  EXPECT_EQ(describe(*r), "reshape 4,-1");
  auto s = parse_slice("0:10,::2");
  ASSERT_TRUE(s.ok());
  const auto& dims = std::get<Slice>(*s).dims;
  ASSERT_EQ(dims.size(), 2u);
  EXPECT_EQ(dims[0].start, 0);
  EXPECT_EQ(dims[0].stop, 10);
  EXPECT_EQ(dims[0].step, 1);
  EXPECT_EQ(dims[1].start, 0);
  EXPECT_EQ(dims[1].stop, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(dims[1].step, 2);
  EXPECT_EQ(describe(*s), "slice 0:10,::2");
  auto neg = parse_slice("-3:,:-1:4");
  ASSERT_TRUE(neg.ok());
  EXPECT_EQ(describe(*neg), "slice -3:,0:-1:4");
  EXPECT_EQ(std::get<Slice>(*neg).dims[0].start, -3);
  EXPECT_EQ(describe(Transform{Scale{0.5}}), "scale 0.5");
  EXPECT_EQ(describe(Transform{Dequantize{}}), "dequantize");

  for (const char* bad : {"1,x", "1,,0", "-1,0", "1.5"}) EXPECT_FALSE(parse_transpose(bad).ok()) << bad;
  for (const char* bad : {"4,-2", "a"}) EXPECT_FALSE(parse_reshape(bad).ok()) << bad;
  for (const char* bad : {"3", "1:2:3:4", "::0", "::-1", "a:", "0:10,"})
    EXPECT_FALSE(parse_slice(bad).ok()) << bad;
  auto msg = parse_slice("0:10,::0");
  ASSERT_FALSE(msg.ok());
  EXPECT_EQ(msg.status().message(), "slice '0:10,::0': step must be > 0");
}

// ---- numpy as the oracle ----

struct NumpyResult {
  std::vector<int64_t> shape;
  std::string bytes;
};

std::optional<NumpyResult> numpy(const std::string& dtype, const Weight& w, const std::string& op,
                                 const std::string& arg, const std::filesystem::path& dir) {
  const auto in = dir / "in.bin", out = dir / "out.bin";
  std::ofstream(in, std::ios::binary)
      .write(static_cast<const char*>(w.data.data()), static_cast<std::streamsize>(w.data.byte_size()));
  std::string shape;
  for (int64_t d : w.shape.dims()) shape += (shape.empty() ? "" : ",") + std::to_string(d);
  const std::string cmd = "/usr/bin/python3 " GANTRY_SOURCE_DIR "/tests/weights/numpy_layout.py " + dtype +
                          " '" + shape + "' " + op + " '" + arg + "' " + in.string() + " " + out.string();
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return std::nullopt;
  std::string text;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) text.append(buf, n);
  if (::pclose(p) != 0) return std::nullopt;
  NumpyResult r;
  r.shape = nlohmann::json::parse(text).at("shape").get<std::vector<int64_t>>();
  std::ifstream f(out, std::ios::binary);
  r.bytes.assign(std::istreambuf_iterator<char>(f), {});
  return r;
}

TEST(Transform, AgreesWithNumpy) {
  ASSERT_TRUE(std::filesystem::exists("/usr/bin/python3")) << "no /usr/bin/python3 (numpy oracle): run make setup";
  test_util::TempDir dir;
  std::mt19937 rng(5);
  std::vector<float> f(2 * 3 * 5 * 4);
  for (float& v : f) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  std::vector<int16_t> i16(6 * 7);
  for (auto& v : i16) v = static_cast<int16_t>(rng());
  std::vector<double> f64(9 * 8);
  for (auto& v : f64) v = std::uniform_real_distribution<double>(-1, 1)(rng);
  const Weight wf = make(DType::kFloat32, Shape{2, 3, 5, 4}, f);
  const Weight wi = make(DType::kInt16, Shape{6, 7}, i16);
  const Weight wd = make(DType::kFloat64, Shape{9, 8}, f64);
  struct Case {
    const Weight* w;
    std::string dtype, op, arg;
  };
  const std::vector<Case> cases = {
      {&wf, "float32", "transpose", "3,1,0,2"}, {&wf, "float32", "transpose", "0,2,1,3"},
      {&wi, "int16", "transpose", "1,0"},       {&wf, "float32", "slice", "1:,::2,-4:-1,1::2"},
      {&wf, "float32", "slice", ":,2:1"},       {&wi, "int16", "slice", "-5:5:3,6:-100"},
      {&wd, "float64", "slice", "::4,1::3"},    {&wd, "float64", "reshape", "2,-1,4"},
      {&wf, "float32", "reshape", "-1,20"},
  };
  for (const Case& c : cases) {
    Result<Transform> t = c.op == "transpose" ? parse_transpose(c.arg)
                          : c.op == "slice"   ? parse_slice(c.arg)
                                              : parse_reshape(c.arg);
    ASSERT_TRUE(t.ok()) << c.arg;
    auto ours = weights::apply(*c.w, *t);
    ASSERT_TRUE(ours.ok()) << ours.status().to_string();
    auto np = numpy(c.dtype, *c.w, c.op, c.arg, dir.path());
    ASSERT_TRUE(np.has_value()) << "numpy failed for " << c.op << " " << c.arg;
    EXPECT_EQ(ours->shape.dims(), np->shape) << c.op << " " << c.arg;
    ASSERT_EQ(ours->data.byte_size(), np->bytes.size()) << c.op << " " << c.arg;
    EXPECT_EQ(std::memcmp(ours->data.data(), np->bytes.data(), np->bytes.size()), 0) << c.op << " " << c.arg;
  }
}

}  // namespace
}  // namespace gantry::weights
