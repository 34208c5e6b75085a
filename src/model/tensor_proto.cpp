#include "gantry/model/tensor_proto.h"

#include <onnx/onnx_pb.h>

#include <climits>
#include <cstring>
#include <vector>

#include "gantry/core/file_io.h"

namespace gantry::model {
namespace {

using onnx::TensorProto;

struct OnnxType {
  int32_t onnx;
  std::optional<DType> dtype;
  const char* name;
};

constexpr OnnxType kOnnxTypes[] = {
    {0, std::nullopt, "UNDEFINED"},       {1, DType::kFloat32, "FLOAT"},
    {2, DType::kUInt8, "UINT8"},          {3, DType::kInt8, "INT8"},
    {4, DType::kUInt16, "UINT16"},        {5, DType::kInt16, "INT16"},
    {6, DType::kInt32, "INT32"},          {7, DType::kInt64, "INT64"},
    {8, DType::kString, "STRING"},        {9, DType::kBool, "BOOL"},
    {10, DType::kFloat16, "FLOAT16"},     {11, DType::kFloat64, "DOUBLE"},
    {12, DType::kUInt32, "UINT32"},       {13, DType::kUInt64, "UINT64"},
    {14, std::nullopt, "COMPLEX64"},      {15, std::nullopt, "COMPLEX128"},
    {16, DType::kBFloat16, "BFLOAT16"},   {17, DType::kFloat8E4M3, "FLOAT8E4M3FN"},
    {18, std::nullopt, "FLOAT8E4M3FNUZ"}, {19, DType::kFloat8E5M2, "FLOAT8E5M2"},
    {20, std::nullopt, "FLOAT8E5M2FNUZ"}, {21, std::nullopt, "UINT4"},
    {22, std::nullopt, "INT4"},           {23, std::nullopt, "FLOAT4E2M1"},
};

// Copies a repeated integer field into narrower (or equal) elements of type T.
template <typename T, typename Field>
void copy_narrowing(const Field& field, Tensor& t) {
  auto out = t.values<T>();
  for (int i = 0; i < field.size(); ++i) out[i] = static_cast<T>(field.Get(i));
}

// Bytes in one typed-field element for `type`, used to bound sizes; which field holds the data.
enum class Field { kFloat, kInt32, kInt64, kDouble, kUInt64, kString };

Field typed_field(DType t) {
  switch (t) {
    case DType::kFloat32:
      return Field::kFloat;
    case DType::kInt64:
      return Field::kInt64;
    case DType::kFloat64:
      return Field::kDouble;
    case DType::kUInt32:
    case DType::kUInt64:
      return Field::kUInt64;
    case DType::kString:
      return Field::kString;
    default:
      return Field::kInt32;
  }
}

int field_size(const TensorProto& p, Field f) {
  switch (f) {
    case Field::kFloat:
      return p.float_data_size();
    case Field::kInt32:
      return p.int32_data_size();
    case Field::kInt64:
      return p.int64_data_size();
    case Field::kDouble:
      return p.double_data_size();
    case Field::kUInt64:
      return p.uint64_data_size();
    case Field::kString:
      return p.string_data_size();
  }
  return 0;
}

const char* field_name(Field f) {
  switch (f) {
    case Field::kFloat:
      return "float_data";
    case Field::kInt32:
      return "int32_data";
    case Field::kInt64:
      return "int64_data";
    case Field::kDouble:
      return "double_data";
    case Field::kUInt64:
      return "uint64_data";
    case Field::kString:
      return "string_data";
  }
  return "?";
}

Result<NamedTensor> from_proto(const TensorProto& p) {
  const std::string label = p.name().empty() ? std::string("TensorProto") : "TensorProto '" + p.name() + "'";
  if (!p.unknown_fields().empty())
    return Corrupt(label +
                   " holds fields a TensorProto does not have (is it a SequenceProto, MapProto or "
                   "OptionalProto?)");
  if (p.data_type() == 0) return Corrupt(label + " has no data_type");
  const auto dtype = dtype_from_onnx(p.data_type());
  if (!dtype)
    return Unsupported(label + " has element type " + onnx_elem_type_name(p.data_type()) +
                       ", which Gantry cannot hold");
  if (p.has_segment()) return Unsupported(label + " is segmented, which is not supported");
  if (p.data_location() == TensorProto::EXTERNAL)
    return Unsupported(label + " keeps its data in an external file, which is not supported for .pb inputs");
  std::vector<int64_t> dims;
  for (int i = 0; i < p.dims_size(); ++i) {
    if (p.dims(i) < 0) return Corrupt(label + " has negative dimension " + std::to_string(p.dims(i)));
    dims.push_back(p.dims(i));
  }
  const Shape shape(std::move(dims));
  const auto count = shape.element_count();
  if (!count) return Corrupt(label + ": shape " + shape.to_string() + " overflows int64");
  const uint64_t n = static_cast<uint64_t>(*count);
  const std::string what = label + " (" + std::string(dtype_name(*dtype)) + shape.to_string() + ")";

  if (p.has_raw_data() && *dtype != DType::kString) {
    const size_t elem = dtype_size(*dtype);
    const std::string& raw = p.raw_data();
    if (n > raw.size() / elem || n * elem != raw.size())
      return Corrupt(what + ": raw_data holds " + std::to_string(raw.size()) + " bytes, the dims need " +
                     (n > UINT64_MAX / elem ? std::string("more than 2^64") : std::to_string(n * elem)));
    auto t = Tensor::allocate(*dtype, shape);
    if (!t.ok()) return t.status().with_context(what);
    if (!raw.empty()) std::memcpy(t->data(), raw.data(), raw.size());
    return NamedTensor{p.name(), std::move(*t)};
  }

  const Field f = typed_field(*dtype);
  const int have = field_size(p, f);
  if (static_cast<uint64_t>(have) != n)
    return Corrupt(what + ": " + field_name(f) + " holds " + std::to_string(have) +
                   " values, the dims need " + std::to_string(n));
  if (*dtype == DType::kString) {
    std::vector<std::string> strings(p.string_data().begin(), p.string_data().end());
    auto t = Tensor::from_strings(shape, std::move(strings));
    if (!t.ok()) return t.status().with_context(what);
    return NamedTensor{p.name(), std::move(*t)};
  }
  auto t = Tensor::allocate(*dtype, shape);
  if (!t.ok()) return t.status().with_context(what);
  switch (*dtype) {
    case DType::kFloat32:
      if (n) std::memcpy(t->data(), p.float_data().data(), n * 4);
      break;
    case DType::kFloat64:
      if (n) std::memcpy(t->data(), p.double_data().data(), n * 8);
      break;
    case DType::kInt64:
      if (n) std::memcpy(t->data(), p.int64_data().data(), n * 8);
      break;
    case DType::kUInt64:
      if (n) std::memcpy(t->data(), p.uint64_data().data(), n * 8);
      break;
    case DType::kUInt32:
      copy_narrowing<uint32_t>(p.uint64_data(), *t);
      break;
    case DType::kInt32:
      copy_narrowing<int32_t>(p.int32_data(), *t);
      break;
    case DType::kInt16:
      copy_narrowing<int16_t>(p.int32_data(), *t);
      break;
    case DType::kInt8:
      copy_narrowing<int8_t>(p.int32_data(), *t);
      break;
    case DType::kUInt16:
    case DType::kFloat16:
    case DType::kBFloat16:
      copy_narrowing<uint16_t>(p.int32_data(), *t);
      break;
    case DType::kUInt8:
    case DType::kFloat8E4M3:  // ONNX stores FP8 bit patterns one per int32_data entry
    case DType::kFloat8E5M2:
      copy_narrowing<uint8_t>(p.int32_data(), *t);
      break;
    case DType::kBool: {
      auto out = t->values<uint8_t>();
      for (int i = 0; i < p.int32_data_size(); ++i) out[i] = p.int32_data(i) != 0 ? 1 : 0;
      break;
    }
    case DType::kString:
      break;
  }
  return NamedTensor{p.name(), std::move(*t)};
}

}  // namespace

std::optional<DType> dtype_from_onnx(int32_t onnx_elem_type) {
  for (const auto& t : kOnnxTypes)
    if (t.onnx == onnx_elem_type) return t.dtype;
  return std::nullopt;
}

int32_t onnx_elem_type(DType dtype) {
  for (const auto& t : kOnnxTypes)
    if (t.dtype == dtype) return t.onnx;
  return 0;
}

std::string onnx_elem_type_name(int32_t onnx_elem_type) {
  for (const auto& t : kOnnxTypes)
    if (t.onnx == onnx_elem_type) return t.name;
  return "UNDEFINED(" + std::to_string(onnx_elem_type) + ")";
}

Result<NamedTensor> parse_tensor_proto(std::span<const std::byte> bytes) {
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    return Unsupported("TensorProto of " + std::to_string(bytes.size()) +
                       " bytes exceeds protobuf's 2 GiB limit");
  TensorProto proto;
  if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return Corrupt("not a valid TensorProto: the " + std::to_string(bytes.size()) +
                   " bytes are truncated or corrupt protobuf");
  return from_proto(proto);
}

Result<NamedTensor> read_tensor_proto(const std::filesystem::path& path) {
  auto bytes = read_file(path);
  if (!bytes.ok()) return bytes.status();
  if (bytes->empty()) return Corrupt(path.string() + ": empty file, not a TensorProto");
  auto t = parse_tensor_proto(std::as_bytes(std::span<const char>(bytes->data(), bytes->size())));
  if (!t.ok()) return t.status().with_context(path.string());
  return t;
}

Result<std::string> serialize_tensor_proto(ConstTensorView tensor, const std::string& name) {
  if (tensor.memory_class() == MemoryClass::kDevice)
    return InvalidArgument("cannot serialise a tensor in device memory; copy it to the host first");
  if (tensor.shape().is_dynamic()) return InvalidArgument("cannot serialise a tensor of dynamic shape");
  TensorProto p;
  p.set_name(name);
  p.set_data_type(onnx_elem_type(tensor.dtype()));
  for (int64_t d : tensor.shape().dims()) p.add_dims(d);
  if (tensor.dtype() == DType::kString) {
    for (const auto& s : tensor.strings()) p.add_string_data(s);
  } else {
    p.set_raw_data(static_cast<const char*>(tensor.data()), tensor.byte_size());
  }
  std::string out;
  if (!p.SerializeToString(&out)) return Internal("protobuf failed to serialise TensorProto '" + name + "'");
  return out;
}

Status write_tensor_proto(const std::filesystem::path& path, ConstTensorView tensor,
                          const std::string& name) {
  auto bytes = serialize_tensor_proto(tensor, name);
  if (!bytes.ok()) return bytes.status().with_context(path.string());
  return write_file(path, *bytes);
}

}  // namespace gantry::model
