// .npy reading and writing: round trips for every dtype, files written by numpy itself, and bad input.
#include "gantry/core/npy.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/temp_dir.h"
#include "gantry/core/file_io.h"

namespace gantry {
namespace {

namespace fs = std::filesystem;

std::span<const std::byte> as_span(const std::string& s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

template <typename T>
void expect_round_trip(DType dtype, const Shape& shape, const std::vector<T>& values) {
  auto t = Tensor::from_values(dtype, shape, values);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  auto bytes = serialize_npy(*t);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  EXPECT_EQ((bytes->size() - values.size() * sizeof(T)) % 64, 0u) << "the header must pad to 64 bytes";
  auto back = parse_npy(as_span(*bytes));
  ASSERT_TRUE(back.ok()) << dtype_name(dtype) << ": " << back.status().to_string();
  EXPECT_EQ(back->dtype(), dtype);
  EXPECT_EQ(back->shape(), shape);
  ASSERT_EQ(back->byte_size(), values.size() * sizeof(T));
  if (!values.empty()) {  // memcmp with a null pointer is undefined even for 0 bytes
    EXPECT_EQ(0, std::memcmp(back->data(), values.data(), values.size() * sizeof(T))) << dtype_name(dtype);
  }
}

TEST(Npy, RoundTripsEveryNumericDType) {
  expect_round_trip<float>(DType::kFloat32, {2, 3}, {1.5f, -2.f, 0.f, 3.25f, 1e30f, -1e-30f});
  expect_round_trip<uint16_t>(DType::kFloat16, {3}, {0x3C00, 0xC000, 0x7BFF});
  expect_round_trip<double>(DType::kFloat64, {2, 1}, {3.141592653589793, -1e300});
  expect_round_trip<int8_t>(DType::kInt8, {4}, {-128, -1, 0, 127});
  expect_round_trip<int16_t>(DType::kInt16, {2}, {-32768, 32767});
  expect_round_trip<int32_t>(DType::kInt32, {1, 2}, {INT32_MIN, INT32_MAX});
  expect_round_trip<int64_t>(DType::kInt64, {2}, {INT64_MIN, INT64_MAX});
  expect_round_trip<uint8_t>(DType::kUInt8, {3}, {0, 128, 255});
  expect_round_trip<uint16_t>(DType::kUInt16, {2}, {0, 65535});
  expect_round_trip<uint32_t>(DType::kUInt32, {2}, {0, UINT32_MAX});
  expect_round_trip<uint64_t>(DType::kUInt64, {2}, {0, UINT64_MAX});
  expect_round_trip<uint8_t>(DType::kBool, {2, 2}, {0, 1, 1, 0});
  expect_round_trip<float>(DType::kFloat32, {}, {42.f});  // scalar
  expect_round_trip<float>(DType::kFloat32, {0, 3}, {});  // empty
  expect_round_trip<int64_t>(DType::kInt64, {1, 1, 1, 1, 2}, {7, 8});
}

TEST(Npy, RoundTripsStrings) {
  auto t = Tensor::from_strings({3}, {"hello", "", "gr\xC3\xBC\xC3\x9F \xF0\x9F\x98\x80"});
  ASSERT_TRUE(t.ok());
  auto bytes = serialize_npy(*t);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto back = parse_npy(as_span(*bytes));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->dtype(), DType::kString);
  EXPECT_EQ(back->strings(), t->strings());
}

TEST(Npy, RefusesBf16AndInvalidUtf8OnWrite) {
  auto bf = Tensor::allocate(DType::kBFloat16, {2});
  ASSERT_TRUE(bf.ok());
  auto r = serialize_npy(*bf);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("bf16"), std::string::npos);
  auto bad = Tensor::from_strings({1}, {"\xFF\xFE"});
  ASSERT_TRUE(bad.ok());
  EXPECT_FALSE(serialize_npy(*bad).ok());
}

TEST(Npy, WriteThenReadFile) {
  test_util::TempDir dir;
  auto t = Tensor::from_values<int32_t>(DType::kInt32, {2, 2}, {1, 2, 3, 4});
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(write_npy(dir.path() / "a.npy", *t).ok());
  auto back = read_npy(dir.path() / "a.npy");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(std::vector<int32_t>(back->values<int32_t>().begin(), back->values<int32_t>().end()),
            (std::vector<int32_t>{1, 2, 3, 4}));
}

TEST(Npy, ReadsVersion2And3Headers) {
  std::string dict = "{'descr': '<i2', 'fortran_order': False, 'shape': (2,), }";
  dict.append(64 - (12 + dict.size() + 1) % 64, ' ');
  dict += '\n';
  std::string file = std::string("\x93NUMPY\x02\x00", 8);
  const uint32_t len = static_cast<uint32_t>(dict.size());
  file.append(reinterpret_cast<const char*>(&len), 4);
  file += dict;
  const int16_t v[2] = {-5, 9};
  file.append(reinterpret_cast<const char*>(v), 4);
  auto t = parse_npy(as_span(file));
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->values<int16_t>()[0], -5);
  EXPECT_EQ(t->values<int16_t>()[1], 9);
  file[6] = '\x03';  // version 3.0 has the same layout (UTF-8 header)
  EXPECT_TRUE(parse_npy(as_span(file)).ok());
}

std::string make_npy(const std::string& header_dict, const std::string& data, int major = 1) {
  std::string dict = header_dict;
  const size_t prefix = major == 1 ? 10 : 12;
  dict.append((64 - (prefix + dict.size() + 1) % 64) % 64, ' ');
  dict += '\n';
  std::string out = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  const uint32_t len = static_cast<uint32_t>(dict.size());
  out.append(reinterpret_cast<const char*>(&len), major == 1 ? 2 : 4);
  return out + dict + data;
}

void expect_error(const std::string& bytes, StatusCode code, const std::string& fragment) {
  auto t = parse_npy(as_span(bytes));
  ASSERT_FALSE(t.ok()) << "expected an error containing '" << fragment << "'";
  EXPECT_EQ(t.status().code(), code) << t.status().to_string();
  EXPECT_NE(t.status().message().find(fragment), std::string::npos) << t.status().to_string();
}

TEST(Npy, BadInputIsAClearError) {
  const std::string four(16, '\0');
  expect_error("", StatusCode::kCorrupt, "shorter than");
  expect_error("hello world, not npy", StatusCode::kCorrupt, "magic");
  expect_error(make_npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", four),
               StatusCode::kUnsupported, "Fortran");
  expect_error(make_npy("{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }", four),
               StatusCode::kUnsupported, "big-endian");
  expect_error(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", four),
               StatusCode::kCorrupt, "truncated");
  expect_error(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", four),
               StatusCode::kCorrupt, "after the array data");
  expect_error(make_npy("{'descr': '|O', 'fortran_order': False, 'shape': (4,), }", four),
               StatusCode::kUnsupported, "not supported");
  expect_error(make_npy("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", four),
               StatusCode::kUnsupported, "not supported");
  expect_error(make_npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,), }", four),
               StatusCode::kUnsupported, "structured");
  expect_error(make_npy("{'descr': '<f4', 'shape': (4,), }", four), StatusCode::kCorrupt, "must hold");
  expect_error(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'x': 1}", four),
               StatusCode::kCorrupt, "unexpected key");
  expect_error(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-4,), }", four),
               StatusCode::kCorrupt, "non-integer");
  expect_error(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", four),
               StatusCode::kCorrupt, "overflows");
  expect_error(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967), }", four),
               StatusCode::kCorrupt, "truncated");
  expect_error(
      make_npy("{'descr': '|b1', 'fortran_order': False, 'shape': (16,), }", std::string(16, '\x07')),
      StatusCode::kCorrupt, "bool");
  expect_error(make_npy("{'descr': '<U0', 'fortran_order': False, 'shape': (1000000000000,), }", ""),
               StatusCode::kUnsupported, "zero-width");
  std::string version9 = make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", four);
  version9[6] = 9;
  expect_error(version9, StatusCode::kUnsupported, "version 9.0");
  // A header length that points past the end.
  std::string long_header = make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", four);
  long_header[8] = '\xff';
  long_header[9] = '\xff';
  expect_error(long_header, StatusCode::kCorrupt, "truncated");
}

TEST(Npy, TruncatedAtEveryLengthIsAnErrorNotACrash) {
  auto t = Tensor::from_values<float>(DType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6});
  ASSERT_TRUE(t.ok());
  auto bytes = serialize_npy(*t);
  ASSERT_TRUE(bytes.ok());
  for (size_t n = 0; n < bytes->size(); ++n) {
    auto r = parse_npy(as_span(bytes->substr(0, n)));
    EXPECT_FALSE(r.ok()) << "prefix of " << n << " bytes parsed";
    EXPECT_FALSE(r.status().message().empty());
  }
}

TEST(Npy, RandomBytesNeverCrash) {
  std::mt19937 rng(1234);
  auto t = Tensor::from_values<float>(DType::kFloat32, {4}, {1, 2, 3, 4});
  ASSERT_TRUE(t.ok());
  const std::string good = *serialize_npy(*t);
  for (int i = 0; i < 2000; ++i) {
    std::string b = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) b[rng() % b.size()] = static_cast<char>(rng());
    auto r = parse_npy(as_span(b));
    if (!r.ok()) {
      EXPECT_FALSE(r.status().message().empty());
    }
  }
  std::string noise(300, '\0');
  for (auto& c : noise) c = static_cast<char>(rng());
  EXPECT_FALSE(parse_npy(as_span(noise)).ok());
}

TEST(Npy, FileErrorsNameThePath) {
  test_util::TempDir dir;
  auto missing = read_npy(dir.path() / "missing.npy");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("missing.npy"), std::string::npos);
  ASSERT_TRUE(write_file(dir.path() / "empty.npy", "").ok());
  auto empty = read_npy(dir.path() / "empty.npy");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("empty.npy"), std::string::npos);
}

// numpy writes; Gantry reads; and the other way round (fails when Debian's python3-numpy is absent).
TEST(Npy, InteroperatesWithNumpy) {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0)
    FAIL() << "/usr/bin/python3 with numpy is not installed";
  test_util::TempDir dir;
  const std::string script = R"PY(
import numpy as np, sys, os
d = sys.argv[1]
np.save(os.path.join(d, 'f32.npy'), np.arange(12, dtype=np.float32).reshape(3, 4) / 7)
np.save(os.path.join(d, 'f16.npy'), np.array([0.5, -2, 65504], dtype=np.float16))
np.save(os.path.join(d, 'f64.npy'), np.array([[1e-300, 2.5]], dtype=np.float64))
for t in ['i1', 'i2', 'i4', 'i8', 'u1', 'u2', 'u4', 'u8']:
    np.save(os.path.join(d, t + '.npy'), np.array([0, 1, 100, np.iinfo(t).max, np.iinfo(t).min], dtype=t))
np.save(os.path.join(d, 'bool.npy'), np.array([True, False, True]))
np.save(os.path.join(d, 'scalar.npy'), np.float32(3.5))
np.save(os.path.join(d, 'str.npy'), np.array(['ab', 'c\u00e9', '']))
np.save(os.path.join(d, 'fortran.npy'), np.asfortranarray(np.ones((2, 3), dtype=np.float32)))
np.save(os.path.join(d, 'big.npy'), np.arange(4, dtype='>i4'))
np.save(os.path.join(d, 'sliced.npy'), np.arange(20, dtype=np.int64)[::3])
with open(os.path.join(d, 'v2.npy'), 'wb') as f:
    np.lib.format.write_array(f, np.arange(5, dtype=np.int16), version=(2, 0))
with open(os.path.join(d, 'v3.npy'), 'wb') as f:
    np.lib.format.write_array(f, np.array(['x\u00e9y']), version=(3, 0))
)PY";
  ASSERT_TRUE(write_file(dir.path() / "gen.py", script).ok());
  ASSERT_EQ(
      0, std::system(
             ("/usr/bin/python3 " + (dir.path() / "gen.py").string() + " " + dir.path().string()).c_str()));

  auto f32 = read_npy(dir.path() / "f32.npy");
  ASSERT_TRUE(f32.ok()) << f32.status().to_string();
  EXPECT_EQ(f32->shape(), Shape({3, 4}));
  EXPECT_FLOAT_EQ(f32->values<float>()[11], 11.0f / 7);
  auto f16 = read_npy(dir.path() / "f16.npy");
  ASSERT_TRUE(f16.ok());
  EXPECT_EQ(f16->dtype(), DType::kFloat16);
  EXPECT_EQ(f16->values<uint16_t>()[0], 0x3800);  // 0.5
  EXPECT_EQ(f16->values<uint16_t>()[2], 0x7BFF);  // 65504
  auto f64 = read_npy(dir.path() / "f64.npy");
  ASSERT_TRUE(f64.ok());
  EXPECT_DOUBLE_EQ(f64->values<double>()[0], 1e-300);
  const std::pair<const char*, DType> ints[] = {
      {"i1", DType::kInt8},  {"i2", DType::kInt16},  {"i4", DType::kInt32},  {"i8", DType::kInt64},
      {"u1", DType::kUInt8}, {"u2", DType::kUInt16}, {"u4", DType::kUInt32}, {"u8", DType::kUInt64}};
  for (const auto& [name, dtype] : ints) {
    auto t = read_npy(dir.path() / (std::string(name) + ".npy"));
    ASSERT_TRUE(t.ok()) << name << ": " << t.status().to_string();
    EXPECT_EQ(t->dtype(), dtype) << name;
    EXPECT_EQ(t->shape(), Shape({5})) << name;
  }
  auto i8 = read_npy(dir.path() / "i8.npy");
  EXPECT_EQ(i8->values<int64_t>()[3], INT64_MAX);
  EXPECT_EQ(i8->values<int64_t>()[4], INT64_MIN);
  auto u8 = read_npy(dir.path() / "u8.npy");
  EXPECT_EQ(u8->values<uint64_t>()[3], UINT64_MAX);
  auto b = read_npy(dir.path() / "bool.npy");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->dtype(), DType::kBool);
  EXPECT_EQ(b->values<uint8_t>()[0], 1);
  EXPECT_EQ(b->values<uint8_t>()[1], 0);
  auto s = read_npy(dir.path() / "scalar.npy");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->shape().rank(), 0u);
  EXPECT_EQ(s->values<float>()[0], 3.5f);
  auto str = read_npy(dir.path() / "str.npy");
  ASSERT_TRUE(str.ok()) << str.status().to_string();
  EXPECT_EQ(str->strings(), (std::vector<std::string>{"ab", "c\xC3\xA9", ""}));
  auto fortran = read_npy(dir.path() / "fortran.npy");
  ASSERT_FALSE(fortran.ok());
  EXPECT_NE(fortran.status().message().find("Fortran"), std::string::npos);
  EXPECT_NE(fortran.status().message().find("fortran.npy"), std::string::npos);
  auto big = read_npy(dir.path() / "big.npy");
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("big-endian"), std::string::npos);
  auto sliced = read_npy(dir.path() / "sliced.npy");
  ASSERT_TRUE(sliced.ok());
  EXPECT_EQ(sliced->values<int64_t>()[6], 18);
  auto v2 = read_npy(dir.path() / "v2.npy");
  ASSERT_TRUE(v2.ok()) << v2.status().to_string();
  EXPECT_EQ(v2->values<int16_t>()[4], 4);
  auto v3 = read_npy(dir.path() / "v3.npy");
  ASSERT_TRUE(v3.ok()) << v3.status().to_string();
  EXPECT_EQ(v3->strings()[0], "x\xC3\xA9y");

  // Gantry writes, numpy checks dtype, shape and values.
  auto mine = Tensor::from_values<int64_t>(DType::kInt64, {2, 2}, {1, -2, 3, INT64_MAX});
  ASSERT_TRUE(write_npy(dir.path() / "mine.npy", *mine).ok());
  auto strs = Tensor::from_strings({2}, {"a\xC3\xA9", "xyz"});
  ASSERT_TRUE(write_npy(dir.path() / "strs.npy", *strs).ok());
  auto bools = Tensor::from_values<uint8_t>(DType::kBool, {3}, {1, 0, 1});
  ASSERT_TRUE(write_npy(dir.path() / "bools.npy", *bools).ok());
  const std::string check = R"PY(
import numpy as np, sys, os
d = sys.argv[1]
a = np.load(os.path.join(d, 'mine.npy'))
assert a.dtype == np.int64 and a.shape == (2, 2) and a[1, 1] == np.iinfo(np.int64).max and a[0, 1] == -2, a
s = np.load(os.path.join(d, 'strs.npy'))
assert s.dtype.kind == 'U' and list(s) == ['a\u00e9', 'xyz'], s
b = np.load(os.path.join(d, 'bools.npy'))
assert b.dtype == np.bool_ and list(b) == [True, False, True], b
)PY";
  ASSERT_TRUE(write_file(dir.path() / "check.py", check).ok());
  EXPECT_EQ(
      0, std::system(
             ("/usr/bin/python3 " + (dir.path() / "check.py").string() + " " + dir.path().string()).c_str()));
}

}  // namespace
}  // namespace gantry
