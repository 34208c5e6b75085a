// Writers, read back by independent readers: a numpy script parsing safetensors by the published layout
// (tests/weights/read_safetensors.py) and llama.cpp's gguf-py GGUFReader (tests/weights/read_gguf.py).
#include "gantry/weights/writer.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <vector>

#include "core/temp_dir.h"
#include "gantry/weights/transform.h"

namespace gantry::weights {
namespace {

template <typename T>
Weight make(std::string name, DType type, const Shape& shape, const std::vector<T>& values) {
  auto t = Tensor::from_values(type, shape, values);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return Weight{std::move(name), type, shape, *t};
}

// A weight of `type` with arbitrary (seeded) bytes; bool bytes are 0/1.
Weight random_weight(std::string name, DType type, const Shape& shape, uint32_t seed) {
  auto t = Tensor::allocate(type, shape);
  EXPECT_TRUE(t.ok());
  std::mt19937 rng(seed);
  auto* p = static_cast<uint8_t*>(t->data());
  for (size_t i = 0; i < t->byte_size(); ++i)
    p[i] = static_cast<uint8_t>(type == DType::kBool ? rng() & 1 : rng());
  return Weight{std::move(name), type, shape, *t};
}

std::string hex(const Tensor& t) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  const auto* p = static_cast<const uint8_t*>(t.data());
  for (size_t i = 0; i < t.byte_size(); ++i) {
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}

std::optional<nlohmann::json> run_reader(const std::string& cmd) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return std::nullopt;
  std::string text;
  char buf[65536];
  while (size_t n = fread(buf, 1, sizeof buf, p)) text.append(buf, n);
  if (::pclose(p) != 0) return std::nullopt;
  return nlohmann::json::parse(text);
}

std::string float_hex(double v) {
  // Python's float.hex() spelling for finite values ("0x1.8000000000000p+0", "-0x0.0p+0").
  if (v == 0) return std::signbit(v) ? "-0x0.0p+0" : "0x0.0p+0";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  std::string s = buf;  // C's "%a": 0x1.8p+0 -> python: 0x1.8000000000000p+0
  const size_t dot = s.find('.'), p = s.find('p');
  std::string mant = dot == std::string::npos ? "" : s.substr(dot + 1, p - dot - 1);
  mant.resize(13, '0');
  const size_t x = s.find('x');
  return s.substr(0, x + 2) + "." + mant + s.substr(p);
}

TEST(Writer, SafetensorsReadBackByThePublishedLayout) {
  ASSERT_TRUE(std::filesystem::exists("/usr/bin/python3")) << "no /usr/bin/python3 (numpy reader): run make setup";
  test_util::TempDir dir;
  std::vector<Weight> ws;
  const std::vector<DType> types = {DType::kFloat16, DType::kFloat32,    DType::kBFloat16,   DType::kFloat64,
                                    DType::kBool,    DType::kFloat8E4M3, DType::kFloat8E5M2, DType::kUInt8,
                                    DType::kUInt16,  DType::kUInt32,     DType::kUInt64,     DType::kInt8,
                                    DType::kInt16,   DType::kInt32,      DType::kInt64};
  uint32_t seed = 1;
  for (DType t : types)
    ws.push_back(random_weight("t." + std::string(dtype_name(t)), t, Shape{3, 5}, seed++));
  // Exact float values numpy can decode (no NaN: compared as numbers too).
  ws.push_back(
      make("floats", DType::kFloat32, Shape{5}, std::vector<float>{1.5f, -0.0f, 1e-45f, 3.4e38f, 0.1f}));
  ws.push_back(make("scalar", DType::kFloat64, Shape{}, std::vector<double>{-2.25}));
  ws.push_back(make("empty", DType::kInt32, Shape{0, 4}, std::vector<int32_t>{}));
  ws.push_back(make("name with \"quotes\" and ü", DType::kUInt8, Shape{2}, std::vector<uint8_t>{7, 9}));
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"general.name", "tiny \"test\""}};
  const auto path = dir.path() / "out.safetensors";
  ASSERT_TRUE(write_safetensors(path, ws, meta).ok());

  auto j =
      run_reader("/usr/bin/python3 " GANTRY_SOURCE_DIR "/tests/weights/read_safetensors.py " + path.string());
  ASSERT_TRUE(j.has_value()) << "the reader rejected the file";
  EXPECT_EQ((*j)["metadata"], nlohmann::json(meta));
  EXPECT_EQ((*j)["header_len"].get<int64_t>() % 8, 0);
  const auto& tensors = (*j)["tensors"];
  ASSERT_EQ(tensors.size(), ws.size());
  std::vector<std::string> order;
  for (const Weight& w : ws) order.push_back(w.name);
  EXPECT_EQ((*j)["header_order"].get<std::vector<std::string>>(), order) << "the header in the given order";
  // The data: decreasing element size, the given order among equals (as the reference implementation).
  std::vector<std::string> data_order;
  for (size_t size : {8, 4, 2, 1})
    for (const Weight& w : ws)
      if (dtype_size(std::get<DType>(w.type)) == size) data_order.push_back(w.name);
  EXPECT_EQ((*j)["order"].get<std::vector<std::string>>(), data_order);
  const std::map<DType, std::string> names = {
      {DType::kFloat32, "F32"},        {DType::kFloat16, "F16"}, {DType::kBFloat16, "BF16"},
      {DType::kFloat64, "F64"},        {DType::kBool, "BOOL"},   {DType::kFloat8E4M3, "F8_E4M3"},
      {DType::kFloat8E5M2, "F8_E5M2"}, {DType::kUInt8, "U8"},    {DType::kUInt16, "U16"},
      {DType::kUInt32, "U32"},         {DType::kUInt64, "U64"},  {DType::kInt8, "I8"},
      {DType::kInt16, "I16"},          {DType::kInt32, "I32"},   {DType::kInt64, "I64"}};
  for (const Weight& w : ws) {
    ASSERT_TRUE(tensors.contains(w.name)) << w.name;
    const auto& t = tensors[w.name];
    EXPECT_EQ(t["dtype"], names.at(std::get<DType>(w.type))) << w.name;
    EXPECT_EQ(t["shape"].get<std::vector<int64_t>>(), w.shape.dims()) << w.name;
    EXPECT_EQ(t["hex"], hex(w.data)) << w.name;
  }
  // Values as numpy decodes them, exactly.
  std::vector<std::string> want;
  for (float f : ws[15].data.values<float>()) want.push_back(float_hex(f));
  EXPECT_EQ(tensors["floats"]["values"].get<std::vector<std::string>>(), want);
  EXPECT_EQ(tensors["scalar"]["values"].get<std::vector<std::string>>(),
            std::vector<std::string>{float_hex(-2.25)});
  const auto i64 = ws[14].data.values<int64_t>();
  EXPECT_EQ(tensors["t.i64"]["values"].get<std::vector<int64_t>>(),
            std::vector<int64_t>(i64.begin(), i64.end()));
  const auto u16 = ws[8].data.values<uint16_t>();
  EXPECT_EQ(tensors["t.u16"]["values"].get<std::vector<uint16_t>>(),
            std::vector<uint16_t>(u16.begin(), u16.end()));
  // bf16 through our cast to f32 equals numpy's bit-shift decoding.
  auto bf = weights::apply(ws[2], Cast{DType::kFloat32});
  ASSERT_TRUE(bf.ok());
  const auto bfv = tensors["t.bf16"]["values"].get<std::vector<std::string>>();
  size_t k = 0;
  for (float f : bf->data.values<float>()) {
    if (!std::isnan(f)) {
      EXPECT_EQ(bfv[k], std::isinf(f) ? std::string(f > 0 ? "inf" : "-inf") : float_hex(f)) << k;
    }
    ++k;
  }
}

TEST(Writer, GgufReadBackByGgufPy) {
  const std::string gguf_py = std::string(GANTRY_DEPS_DIR) + "/llama/src/gguf-py";
  ASSERT_TRUE(std::filesystem::exists("/usr/bin/python3") && std::filesystem::exists(gguf_py))
      << "no /usr/bin/python3 or llama.cpp's gguf-py at " << gguf_py << ": run make setup";
  test_util::TempDir dir;
  std::vector<Weight> ws;
  ws.push_back(random_weight("f32", DType::kFloat32, Shape{3, 5}, 1));
  ws.push_back(random_weight("f16", DType::kFloat16, Shape{7}, 2));
  ws.push_back(random_weight("bf16", DType::kBFloat16, Shape{2, 3, 4}, 3));
  ws.push_back(random_weight("f64", DType::kFloat64, Shape{1, 1, 2, 3}, 4));
  ws.push_back(random_weight("i8", DType::kInt8, Shape{9}, 5));
  ws.push_back(random_weight("i16", DType::kInt16, Shape{3, 1}, 6));
  ws.push_back(random_weight("i32", DType::kInt32, Shape{4}, 7));
  ws.push_back(random_weight("i64", DType::kInt64, Shape{2}, 8));
  ws.push_back(make("scalar", DType::kFloat32, Shape{}, std::vector<float>{4.0f}));
  std::mt19937 rng(9);
  std::vector<float> x(4 * 64);
  for (float& v : x) v = std::normal_distribution<float>(0, 1)(rng);
  const Weight src = make("blk.0.attn_q.weight", DType::kFloat32, Shape{4, 64}, x);
  for (auto q : {model::GgmlType::kQ8_0, model::GgmlType::kQ4_0}) {
    auto w = weights::apply(src, Quantize{q});
    ASSERT_TRUE(w.ok());
    w->name += "." + weight_type_name(w->type);
    ws.push_back(*w);
  }
  const std::map<std::string, std::string> meta = {{"general.name", "tiny"},
                                                   {"general.architecture", "llama"},
                                                   {"general.description", "ünïcode \"quoted\""}};
  const auto path = dir.path() / "out.gguf";
  ASSERT_TRUE(write_gguf(path, ws, meta).ok());

  auto j = run_reader("PYTHONPATH=" + gguf_py +
                      " /usr/bin/python3 " GANTRY_SOURCE_DIR "/tests/weights/read_gguf.py " + path.string());
  ASSERT_TRUE(j.has_value()) << "gguf-py rejected the file";
  EXPECT_EQ((*j)["version"], 3);
  EXPECT_EQ((*j)["alignment"], 32);
  EXPECT_EQ((*j)["data_offset"].get<int64_t>() % 32, 0);
  EXPECT_EQ((*j)["fields"], nlohmann::json(meta));
  const auto& tensors = (*j)["tensors"];
  ASSERT_EQ(tensors.size(), ws.size());
  const std::map<std::string, int> ids = {{"f32", 0},  {"f16", 1},  {"bf16", 30}, {"f64", 28},  {"i8", 24},
                                          {"i16", 25}, {"i32", 26}, {"i64", 27},  {"scalar", 0}};
  for (size_t i = 0; i < ws.size(); ++i) {
    const Weight& w = ws[i];
    const auto& t = tensors[i];
    EXPECT_EQ(t["name"], w.name);
    if (w.quantised()) {
      EXPECT_EQ(t["type"].get<int>(), static_cast<int>(std::get<model::GgmlType>(w.type))) << w.name;
    } else {
      EXPECT_EQ(t["type"].get<int>(), ids.at(w.name)) << w.name;
    }
    std::vector<int64_t> ne(w.shape.dims().rbegin(), w.shape.dims().rend());
    if (ne.empty()) ne = {1};
    EXPECT_EQ(t["ne"].get<std::vector<int64_t>>(), ne) << w.name;
    EXPECT_EQ(t["n_bytes"].get<uint64_t>(), w.data.byte_size()) << w.name;
    EXPECT_EQ(t["data_offset"].get<int64_t>() % 32, 0) << w.name;
    EXPECT_EQ(t["hex"], hex(w.data)) << w.name;
  }
}

TEST(Writer, RefusesWhatTheFormatCannotHold) {
  test_util::TempDir dir;
  const auto st = dir.path() / "x.safetensors";
  const auto gg = dir.path() / "x.gguf";
  const Weight f = random_weight("a", DType::kFloat32, Shape{2, 32}, 1);
  auto q = weights::apply(f, Quantize{model::GgmlType::kQ8_0});
  ASSERT_TRUE(q.ok());

  Status s = write_safetensors(st, {f, *q}, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "writing safetensors " + st.string() +
                             ": 'a' is q8_0, which safetensors cannot hold (dequantize it, or write GGUF)");
  s = write_safetensors(st, {f, f}, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "writing safetensors " + st.string() + ": safetensors: two tensors are named 'a'");
  Weight lie = f;
  lie.shape = Shape{2, 33};
  s = write_safetensors(st, {lie}, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "writing safetensors " + st.string() +
                             ": safetensors: 'a' holds 256 bytes, f32 [2,33] needs 264");
  Weight meta = f;
  meta.name = "__metadata__";
  EXPECT_FALSE(write_safetensors(st, {meta}, {}).ok());
  Weight unnamed = f;
  unnamed.name.clear();
  EXPECT_FALSE(write_safetensors(st, {unnamed}, {}).ok());
  EXPECT_FALSE(std::filesystem::exists(st)) << "a refused write leaves no file";

  s = write_gguf(gg, {random_weight("u", DType::kUInt16, Shape{2}, 2)}, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "writing GGUF " + gg.string() +
                ": 'u' is u16, which GGUF has no type for (cast it to f32, f16, bf16, f64 or i8..i64)");
  s = write_gguf(gg, {random_weight("r5", DType::kFloat32, Shape{1, 1, 1, 1, 2}, 3)}, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "writing GGUF " + gg.string() + ": 'r5' has rank 5, GGUF (ggml) allows at most 4 dimensions");
  Weight short_q = *q;
  short_q.shape = Shape{3, 32};
  s = write_gguf(gg, {short_q}, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "writing GGUF " + gg.string() + ": GGUF: 'a' holds 68 bytes, q8_0 [3,32] needs 102");
  EXPECT_FALSE(std::filesystem::exists(gg));

  // An unwritable destination names the file.
  s = write_gguf(dir.path() / "missing" / "x.gguf", {f}, {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("missing/x.gguf"), std::string::npos) << s.message();
  // Nothing to write is still a valid file of each kind.
  EXPECT_TRUE(write_safetensors(st, {}, {}).ok());
  EXPECT_TRUE(write_gguf(gg, {}, {}).ok());
  EXPECT_TRUE(std::filesystem::exists(gg));
}

}  // namespace
}  // namespace gantry::weights
