// ONNX TensorProto (.pb) reading: typed fields, raw_data, the ONNX node-test data sets compared against
// onnx.numpy_helper, and bad input.
#include "gantry/model/tensor_proto.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "core/temp_dir.h"
#include "gantry/core/file_io.h"
#include "gantry/core/npy.h"

namespace gantry::model {
namespace {

namespace fs = std::filesystem;
const fs::path kNodeTests = "/usr/share/libonnx-testdata/data/node";

std::span<const std::byte> as_span(const std::string& s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

Result<NamedTensor> parse(const onnx::TensorProto& p) {
  std::string bytes;
  p.SerializeToString(&bytes);
  return parse_tensor_proto(as_span(bytes));
}

TEST(TensorProto, DTypeMapping) {
  EXPECT_EQ(dtype_from_onnx(1), DType::kFloat32);
  EXPECT_EQ(dtype_from_onnx(7), DType::kInt64);
  EXPECT_EQ(dtype_from_onnx(16), DType::kBFloat16);
  EXPECT_EQ(dtype_from_onnx(14), std::nullopt);  // complex64
  EXPECT_EQ(dtype_from_onnx(999), std::nullopt);
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt8,
                  DType::kInt16, DType::kInt32, DType::kInt64, DType::kUInt8, DType::kUInt16, DType::kUInt32,
                  DType::kUInt64, DType::kBool, DType::kString})
    EXPECT_EQ(dtype_from_onnx(onnx_elem_type(t)), t) << dtype_name(t);
  EXPECT_EQ(onnx_elem_type_name(19), "FLOAT8E5M2");
  EXPECT_EQ(onnx_elem_type_name(77), "UNDEFINED(77)");
}

TEST(TensorProto, RoundTripsRawData) {
  auto t = Tensor::from_values<int16_t>(DType::kInt16, {2, 2}, {1, -2, 300, -32768});
  ASSERT_TRUE(t.ok());
  auto bytes = serialize_tensor_proto(*t, "x");
  ASSERT_TRUE(bytes.ok());
  auto back = parse_tensor_proto(as_span(*bytes));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->name, "x");
  EXPECT_EQ(back->tensor.shape(), Shape({2, 2}));
  EXPECT_EQ(back->tensor.values<int16_t>()[3], -32768);
  auto s = Tensor::from_strings({2}, {"a", "bc"});
  auto sb = serialize_tensor_proto(*s, "s");
  ASSERT_TRUE(sb.ok());
  auto sback = parse_tensor_proto(as_span(*sb));
  ASSERT_TRUE(sback.ok());
  EXPECT_EQ(sback->tensor.strings(), (std::vector<std::string>{"a", "bc"}));
}

TEST(TensorProto, ReadsEveryTypedField) {
  onnx::TensorProto p;
  p.set_name("f");
  p.set_data_type(onnx::TensorProto::FLOAT);
  p.add_dims(3);
  for (float v : {1.5f, -2.f, 3.f}) p.add_float_data(v);
  auto f = parse(p);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->tensor.values<float>()[1], -2.f);

  onnx::TensorProto h;
  h.set_data_type(onnx::TensorProto::FLOAT16);
  h.add_dims(2);
  h.add_int32_data(0x3C00);
  h.add_int32_data(0xC000);
  auto hf = parse(h);
  ASSERT_TRUE(hf.ok());
  EXPECT_EQ(hf->tensor.dtype(), DType::kFloat16);
  EXPECT_EQ(hf->tensor.values<uint16_t>()[1], 0xC000);

  onnx::TensorProto b;
  b.set_data_type(onnx::TensorProto::BOOL);
  b.add_dims(3);
  for (int v : {1, 0, 5}) b.add_int32_data(v);
  auto bt = parse(b);
  ASSERT_TRUE(bt.ok());
  EXPECT_EQ(bt->tensor.values<uint8_t>()[2], 1);

  onnx::TensorProto i8;
  i8.set_data_type(onnx::TensorProto::INT8);
  i8.add_dims(2);
  i8.add_int32_data(-128);
  i8.add_int32_data(127);
  EXPECT_EQ(parse(i8)->tensor.values<int8_t>()[0], -128);

  onnx::TensorProto u16;
  u16.set_data_type(onnx::TensorProto::UINT16);
  u16.add_dims(1);
  u16.add_int32_data(65535);
  EXPECT_EQ(parse(u16)->tensor.values<uint16_t>()[0], 65535);

  onnx::TensorProto i64;
  i64.set_data_type(onnx::TensorProto::INT64);
  i64.add_int64_data(INT64_MIN);  // scalar: no dims
  auto i64t = parse(i64);
  ASSERT_TRUE(i64t.ok());
  EXPECT_EQ(i64t->tensor.shape().rank(), 0u);
  EXPECT_EQ(i64t->tensor.values<int64_t>()[0], INT64_MIN);

  onnx::TensorProto d;
  d.set_data_type(onnx::TensorProto::DOUBLE);
  d.add_dims(1);
  d.add_double_data(1e300);
  EXPECT_EQ(parse(d)->tensor.values<double>()[0], 1e300);

  onnx::TensorProto u32;
  u32.set_data_type(onnx::TensorProto::UINT32);
  u32.add_dims(2);
  u32.add_uint64_data(UINT32_MAX);
  u32.add_uint64_data(7);
  EXPECT_EQ(parse(u32)->tensor.values<uint32_t>()[0], UINT32_MAX);

  onnx::TensorProto u64;
  u64.set_data_type(onnx::TensorProto::UINT64);
  u64.add_dims(1);
  u64.add_uint64_data(UINT64_MAX);
  EXPECT_EQ(parse(u64)->tensor.values<uint64_t>()[0], UINT64_MAX);

  onnx::TensorProto s;
  s.set_data_type(onnx::TensorProto::STRING);
  s.add_dims(2);
  s.add_string_data("hi");
  s.add_string_data(std::string("a\0b", 3));
  auto st = parse(s);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->tensor.strings()[1], std::string("a\0b", 3));

  onnx::TensorProto empty;
  empty.set_data_type(onnx::TensorProto::FLOAT);
  empty.add_dims(0);
  empty.add_dims(4);
  auto et = parse(empty);
  ASSERT_TRUE(et.ok()) << et.status().to_string();
  EXPECT_EQ(et->tensor.element_count(), 0);
}

void expect_error(const onnx::TensorProto& p, StatusCode code, const std::string& fragment) {
  auto r = parse(p);
  ASSERT_FALSE(r.ok()) << fragment;
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status().to_string();
}

TEST(TensorProto, SizeMismatchesAndUnsupportedTypesAreClearErrors) {
  onnx::TensorProto raw;
  raw.set_name("w");
  raw.set_data_type(onnx::TensorProto::FLOAT);
  raw.add_dims(2);
  raw.add_dims(3);
  raw.set_raw_data(std::string(20, '\0'));
  expect_error(raw, StatusCode::kCorrupt, "raw_data holds 20 bytes, the dims need 24");

  onnx::TensorProto absurd;
  absurd.set_data_type(onnx::TensorProto::DOUBLE);
  absurd.add_dims(INT64_C(1) << 40);
  absurd.add_dims(INT64_C(1) << 20);
  absurd.set_raw_data(std::string(8, '\0'));
  expect_error(absurd, StatusCode::kCorrupt, "raw_data holds 8 bytes");

  onnx::TensorProto overflow;
  overflow.set_data_type(onnx::TensorProto::FLOAT);
  overflow.add_dims(INT64_C(1) << 40);
  overflow.add_dims(INT64_C(1) << 40);
  expect_error(overflow, StatusCode::kCorrupt, "overflows");

  onnx::TensorProto typed;
  typed.set_data_type(onnx::TensorProto::INT64);
  typed.add_dims(1000000000);
  typed.add_int64_data(1);
  expect_error(typed, StatusCode::kCorrupt, "int64_data holds 1 values, the dims need 1000000000");

  onnx::TensorProto neg;
  neg.set_data_type(onnx::TensorProto::FLOAT);
  neg.add_dims(-3);
  expect_error(neg, StatusCode::kCorrupt, "negative dimension");

  onnx::TensorProto complex;
  complex.set_data_type(onnx::TensorProto::COMPLEX64);
  complex.add_dims(1);
  complex.add_float_data(1);
  complex.add_float_data(2);
  expect_error(complex, StatusCode::kUnsupported, "COMPLEX64");

  onnx::TensorProto untyped;
  untyped.add_dims(1);
  expect_error(untyped, StatusCode::kCorrupt, "no data_type");

  onnx::TensorProto external;
  external.set_data_type(onnx::TensorProto::FLOAT);
  external.add_dims(1);
  external.set_data_location(onnx::TensorProto::EXTERNAL);
  auto* e = external.add_external_data();
  e->set_key("location");
  e->set_value("/etc/passwd");
  expect_error(external, StatusCode::kUnsupported, "external");
}

TEST(TensorProto, TruncatedAndRandomBytesAreErrorsNotCrashes) {
  auto t = Tensor::from_values<float>(DType::kFloat32, {3, 5}, std::vector<float>(15, 0.25f));
  auto bytes = *serialize_tensor_proto(*t, "input_0");
  // Every strict prefix either fails or (at a field boundary) yields a tensor whose data does not match dims.
  for (size_t n = 1; n < bytes.size(); ++n) {
    auto r = parse_tensor_proto(as_span(bytes.substr(0, n)));
    EXPECT_FALSE(r.ok()) << "prefix of " << n << " of " << bytes.size() << " bytes parsed";
  }
  std::mt19937 rng(7);
  int errors = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string b = bytes;
    for (int f = 0; f < 3; ++f) b[rng() % b.size()] = static_cast<char>(rng());
    auto r = parse_tensor_proto(as_span(b));
    if (!r.ok()) {
      ++errors;
      EXPECT_FALSE(r.status().message().empty());
    }
  }
  EXPECT_GT(errors, 0);
  std::string noise(4096, '\0');
  for (auto& c : noise) c = static_cast<char>(rng());
  EXPECT_FALSE(parse_tensor_proto(as_span(noise)).ok());
}

TEST(TensorProto, FileErrorsNameThePath) {
  test_util::TempDir dir;
  auto missing = read_tensor_proto(dir.path() / "nope.pb");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(write_file(dir.path() / "empty.pb", "").ok());
  auto empty = read_tensor_proto(dir.path() / "empty.pb");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("empty.pb"), std::string::npos);
  ASSERT_TRUE(write_file(dir.path() / "junk.pb", "\xff\xff\xff\xff garbage").ok());
  auto junk = read_tensor_proto(dir.path() / "junk.pb");
  ASSERT_FALSE(junk.ok());
  EXPECT_NE(junk.status().message().find("junk.pb"), std::string::npos);
}

// Every input/output .pb of the ONNX node tests whose graph value is a tensor reads, and equals what
// onnx.numpy_helper makes of it (exported by python as .npy); sequences/optionals are refused cleanly.
TEST(TensorProto, ReadsTheOnnxNodeTestDataLikeNumpyHelper) {
  if (!fs::exists(kNodeTests)) FAIL() << kNodeTests << " is missing (Debian package libonnx-testdata)";
  if (std::system("/usr/bin/python3 -c 'import onnx, numpy' >/dev/null 2>&1") != 0)
    FAIL() << "/usr/bin/python3 with onnx and numpy is not installed";
  test_util::TempDir dir;
  // Writes "<pb path>\t<kind>\t<npy path or ->" per file; kind is tensor/other from the model's graph.
  const std::string script = R"PY(
import onnx, numpy as np, sys, os, glob
from onnx import numpy_helper
root, out = sys.argv[1], sys.argv[2]
lines = []
for i, test in enumerate(sorted(glob.glob(os.path.join(root, '*')))):
    try:
        model = onnx.load(os.path.join(test, 'model.onnx'))
    except Exception:
        continue
    ins = [v for v in model.graph.input if v.name not in {x.name for x in model.graph.initializer}]
    for kind, values in (('input', ins), ('output', list(model.graph.output))):
        for j, v in enumerate(values):
            pb = os.path.join(test, 'test_data_set_0', '%s_%d.pb' % (kind, j))
            if not os.path.exists(pb):
                continue
            is_tensor = v.type.WhichOneof('value') == 'tensor_type'
            npy = '-'
            if is_tensor:
                t = onnx.TensorProto()
                with open(pb, 'rb') as f:
                    t.ParseFromString(f.read())
                if t.data_type not in (onnx.TensorProto.BFLOAT16, onnx.TensorProto.COMPLEX64, onnx.TensorProto.COMPLEX128):
                    a = numpy_helper.to_array(t)
                    if a.dtype == object:
                        a = np.array([x.decode('utf-8') if isinstance(x, bytes) else x for x in a.flat]).reshape(a.shape) if a.size else np.zeros(a.shape, dtype='U1')
                    npy = os.path.join(out, '%d_%s_%d.npy' % (i, kind, j))
                    np.save(npy, a.copy(order='C'))
            lines.append('%s\t%s\t%s' % (pb, 'tensor' if is_tensor else 'other', npy))
with open(os.path.join(out, 'index.tsv'), 'w') as f:
    f.write('\n'.join(lines) + '\n')
)PY";
  ASSERT_TRUE(write_file(dir.path() / "export.py", script).ok());
  const std::string cmd = "/usr/bin/python3 " + (dir.path() / "export.py").string() + " " +
                          kNodeTests.string() + " " + dir.path().string();
  ASSERT_EQ(0, std::system(cmd.c_str()));
  std::ifstream index(dir.path() / "index.tsv");
  std::string line;
  int tensors = 0, compared = 0, others = 0, others_refused = 0;
  while (std::getline(index, line)) {
    if (line.empty()) continue;
    const auto t1 = line.find('\t'), t2 = line.find('\t', t1 + 1);
    const std::string pb = line.substr(0, t1), kind = line.substr(t1 + 1, t2 - t1 - 1),
                      npy = line.substr(t2 + 1);
    auto mine = read_tensor_proto(pb);
    if (kind != "tensor") {
      ++others;
      if (!mine.ok()) {
        ++others_refused;
        EXPECT_FALSE(mine.status().message().empty());
      }
      continue;
    }
    ++tensors;
    ASSERT_TRUE(mine.ok()) << pb << ": " << mine.status().to_string();
    if (npy == "-") continue;
    auto ref = read_npy(npy);
    ASSERT_TRUE(ref.ok()) << npy << ": " << ref.status().to_string();
    ASSERT_EQ(mine->tensor.shape(), ref->shape()) << pb;
    if (mine->tensor.dtype() == DType::kString) {
      ASSERT_EQ(ref->dtype(), DType::kString) << pb;
      EXPECT_EQ(mine->tensor.strings(), ref->strings()) << pb;
    } else {
      ASSERT_EQ(mine->tensor.dtype(), ref->dtype()) << pb;
      ASSERT_EQ(mine->tensor.byte_size(), ref->byte_size()) << pb;
      EXPECT_EQ(0, std::memcmp(mine->tensor.data(), ref->data(), ref->byte_size())) << pb;
    }
    ++compared;
  }
  std::cout << "[ info ] " << tensors << " tensor .pb files read, " << compared
            << " compared with numpy_helper; " << others << " sequence/optional/map files, " << others_refused
            << " of them refused\n";
  EXPECT_GT(tensors, 2000);
  EXPECT_GT(compared, 2000);
}

}  // namespace
}  // namespace gantry::model
