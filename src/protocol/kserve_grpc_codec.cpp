#include "gantry/protocol/kserve_grpc_codec.h"

#include <cstring>
#include <limits>
#include <string>
#include <utility>

namespace gantry::protocol::kserve_grpc {
namespace {
using inference::InferTensorContents;

std::string str(std::string_view s) { return std::string(s); }

std::string names_of(const std::vector<backend::TensorInfo>& infos) {
  std::string s;
  for (const auto& i : infos) s += (s.empty() ? "'" : ", '") + i.name + "'";
  return s.empty() ? "none" : s;
}

// The typed field a datatype travels in, for messages.
std::string_view field_for(DType t) {
  switch (t) {
    case DType::kBool:
      return "bool_contents";
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
      return "int_contents";
    case DType::kInt64:
      return "int64_contents";
    case DType::kUInt8:
    case DType::kUInt16:
    case DType::kUInt32:
      return "uint_contents";
    case DType::kUInt64:
      return "uint64_contents";
    case DType::kFloat32:
      return "fp32_contents";
    case DType::kFloat64:
      return "fp64_contents";
    case DType::kString:
      return "bytes_contents";
    default:
      return "";
  }
}

// Elements of each typed field, in field order (to find the ones given for the wrong datatype).
std::array<std::pair<std::string_view, int>, 8> field_sizes(const InferTensorContents& c) {
  return {{{"bool_contents", c.bool_contents_size()},
           {"int_contents", c.int_contents_size()},
           {"int64_contents", c.int64_contents_size()},
           {"uint_contents", c.uint_contents_size()},
           {"uint64_contents", c.uint64_contents_size()},
           {"fp32_contents", c.fp32_contents_size()},
           {"fp64_contents", c.fp64_contents_size()},
           {"bytes_contents", c.bytes_contents_size()}}};
}

bool has_any(const InferTensorContents& c) {
  for (const auto& [name, n] : field_sizes(c))
    if (n > 0) return true;
  return false;
}

// Copies `values` into a new tensor of element type T, refusing values outside T's range.
template <typename T, typename Field>
Result<Tensor> narrow_copy(DType dtype, const Shape& shape, const Field& values) {
  GANTRY_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(dtype, shape));
  T* out = static_cast<T*>(t.data());
  for (int i = 0; i < values.size(); ++i) {
    const auto v = values.Get(i);
    if (!std::in_range<T>(v))
      return InvalidArgument("element " + std::to_string(i) + " is " + std::to_string(v) + ", outside " +
                             str(kserve::datatype_name(dtype)) + "'s range");
    out[i] = static_cast<T>(v);
  }
  return t;
}

template <typename T, typename Field>
Result<Tensor> plain_copy(DType dtype, const Shape& shape, const Field& values) {
  GANTRY_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(dtype, shape));
  if (values.size() > 0) std::memcpy(t.data(), values.data(), sizeof(T) * static_cast<size_t>(values.size()));
  return t;
}

Result<Tensor> tensor_from_contents(DType dtype, const Shape& shape, const InferTensorContents& c) {
  const std::string_view field = field_for(dtype);
  if (field.empty())
    return InvalidArgument(str(kserve::datatype_name(dtype)) +
                           " has no typed contents field in the protocol; send it in raw_input_contents");
  const int64_t count = shape.element_count().value_or(-1);
  for (const auto& [name, n] : field_sizes(c)) {
    if (name == field) {
      if (n != count)
        return InvalidArgument("contents." + str(name) + " has " + std::to_string(n) +
                               " elements but shape " + shape.to_string() + " needs " +
                               std::to_string(count));
    } else if (n > 0) {
      return InvalidArgument("contents." + str(name) + " is set but datatype " +
                             str(kserve::datatype_name(dtype)) + " travels in contents." + str(field));
    }
  }
  switch (dtype) {
    case DType::kBool: {
      GANTRY_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(dtype, shape));
      auto* out = static_cast<uint8_t*>(t.data());
      for (int i = 0; i < c.bool_contents_size(); ++i) out[i] = c.bool_contents(i) ? 1 : 0;
      return t;
    }
    case DType::kInt8:
      return narrow_copy<int8_t>(dtype, shape, c.int_contents());
    case DType::kInt16:
      return narrow_copy<int16_t>(dtype, shape, c.int_contents());
    case DType::kInt32:
      return plain_copy<int32_t>(dtype, shape, c.int_contents());
    case DType::kInt64:
      return plain_copy<int64_t>(dtype, shape, c.int64_contents());
    case DType::kUInt8:
      return narrow_copy<uint8_t>(dtype, shape, c.uint_contents());
    case DType::kUInt16:
      return narrow_copy<uint16_t>(dtype, shape, c.uint_contents());
    case DType::kUInt32:
      return plain_copy<uint32_t>(dtype, shape, c.uint_contents());
    case DType::kUInt64:
      return plain_copy<uint64_t>(dtype, shape, c.uint64_contents());
    case DType::kFloat32:
      return plain_copy<float>(dtype, shape, c.fp32_contents());
    case DType::kFloat64:
      return plain_copy<double>(dtype, shape, c.fp64_contents());
    case DType::kString:
      return Tensor::from_strings(shape, {c.bytes_contents().begin(), c.bytes_contents().end()});
    default:
      return InvalidArgument("unsupported datatype");  // unreachable: field_for is empty
  }
}

template <typename T, typename Field>
void append_values(const ConstTensorView& t, Field* field) {
  const auto* v = static_cast<const T*>(t.data());
  const int64_t n = t.element_count();
  field->Reserve(static_cast<int>(n));
  for (int64_t i = 0; i < n; ++i) field->Add(v[i]);
}

// The contents field KServe v2 keeps each element type in (int_contents for i8..i32, uint_contents for
// u8..u32, ...); FP16/BF16/FP8 have none: the encoder sends those raw.
void tensor_to_contents(const ConstTensorView& t, InferTensorContents& c) {
  visit_dtype(t.dtype(), [&]<DType D>(DTypeTag<D>) {
    using T = dtype_storage_t<D>;
    if constexpr (D == DType::kBool) {
      const auto* v = static_cast<const uint8_t*>(t.data());
      for (int64_t i = 0; i < t.element_count(); ++i) c.add_bool_contents(v[i] != 0);
    } else if constexpr (D == DType::kString) {
      for (const std::string& s : t.strings()) c.add_bytes_contents(s);
    } else if constexpr (D == DType::kInt64) {
      append_values<T>(t, c.mutable_int64_contents());
    } else if constexpr (D == DType::kUInt64) {
      append_values<T>(t, c.mutable_uint64_contents());
    } else if constexpr (D == DType::kFloat32) {
      append_values<T>(t, c.mutable_fp32_contents());
    } else if constexpr (D == DType::kFloat64) {
      append_values<T>(t, c.mutable_fp64_contents());
    } else if constexpr (is_integer_dtype(D) && std::is_signed_v<T>) {
      append_values<T>(t, c.mutable_int_contents());
    } else if constexpr (is_integer_dtype(D)) {
      append_values<T>(t, c.mutable_uint_contents());
    }
  });
}

nlohmann::json parameter_json(const inference::InferParameter& p) {
  switch (p.parameter_choice_case()) {
    case inference::InferParameter::kBoolParam:
      return p.bool_param();
    case inference::InferParameter::kInt64Param:
      return p.int64_param();
    case inference::InferParameter::kStringParam:
      return p.string_param();
    case inference::InferParameter::kDoubleParam:
      return p.double_param();
    case inference::InferParameter::kUint64Param:
      return p.uint64_param();
    default:
      return nullptr;
  }
}
}  // namespace

grpc::StatusCode code_for(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return grpc::StatusCode::OK;
    case StatusCode::kInvalidArgument:
    case StatusCode::kCorrupt:
    case StatusCode::kUnsupported:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case StatusCode::kNotFound:
      return grpc::StatusCode::NOT_FOUND;
    case StatusCode::kResourceExhausted:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case StatusCode::kFailedPrecondition:
      return grpc::StatusCode::FAILED_PRECONDITION;
    case StatusCode::kUnavailable:
      return grpc::StatusCode::UNAVAILABLE;
    case StatusCode::kCancelled:
      return grpc::StatusCode::CANCELLED;
    case StatusCode::kIoError:
    case StatusCode::kInternal:
      return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::INTERNAL;
}

grpc::Status to_grpc(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(code_for(status.code()), status.message());
}

int http_status_for_grpc(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return 200;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE:
      return 400;
    case grpc::StatusCode::UNAUTHENTICATED:
      return 401;
    case grpc::StatusCode::PERMISSION_DENIED:
      return 403;
    case grpc::StatusCode::NOT_FOUND:
      return 404;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return 429;
    case grpc::StatusCode::CANCELLED:
      return 499;
    case grpc::StatusCode::UNIMPLEMENTED:
      return 501;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::FAILED_PRECONDITION:
      return 503;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return 504;
    default:
      return 500;
  }
}

Result<kserve::InferRequest> parse_infer_request(const inference::ModelInferRequest& request,
                                                 const backend::ModelMetadata& model,
                                                 std::shared_ptr<const void> request_owner) {
  kserve::InferRequest out;
  out.id = request.id();
  if (!request.parameters().empty()) {
    out.parameters = nlohmann::json::object();
    for (const auto& [k, v] : request.parameters()) out.parameters[k] = parameter_json(v);
  }
  const bool raw = request.raw_input_contents_size() > 0;
  if (raw && request.raw_input_contents_size() != request.inputs_size())
    return InvalidArgument("raw_input_contents has " + std::to_string(request.raw_input_contents_size()) +
                           " entries but the request has " + std::to_string(request.inputs_size()) +
                           " inputs; send one entry per input, in the order of inputs");
  out.binary_outputs = raw;

  out.inputs.resize(model.inputs.size());
  std::vector<bool> seen(model.inputs.size(), false);
  for (int position = 0; position < request.inputs_size(); ++position) {
    const auto& in = request.inputs(position);
    const std::string& name = in.name();
    auto fail = [&](const Status& s) { return s.with_context("input '" + name + "'"); };
    const int index = model.input_index(name);
    if (index < 0)
      return InvalidArgument("input '" + name + "' is not an input of model '" + model.name +
                             "' (its inputs: " + names_of(model.inputs) + ")");
    if (seen[static_cast<size_t>(index)]) return InvalidArgument("input '" + name + "' is given twice");
    seen[static_cast<size_t>(index)] = true;
    const backend::TensorInfo& info = model.inputs[static_cast<size_t>(index)];

    auto dtype = kserve::parse_datatype(in.datatype());
    if (!dtype)
      return fail(InvalidArgument("unknown datatype \"" + in.datatype() + "\" (the model expects " +
                                  str(kserve::datatype_name(info.dtype)) + ")"));
    if (*dtype != info.dtype)
      return fail(InvalidArgument("datatype " + in.datatype() + " does not match the model's " +
                                  str(kserve::datatype_name(info.dtype))));
    std::vector<int64_t> dims(in.shape().begin(), in.shape().end());
    for (int64_t d : dims)
      if (d < 0)
        return fail(InvalidArgument("shape dimensions must be non-negative, got " + std::to_string(d)));
    Shape shape(std::move(dims));
    if (!shape.element_count())
      return fail(InvalidArgument("shape " + shape.to_string() + " has too many elements"));
    GANTRY_RETURN_IF_ERROR(fail(kserve::check_shape(shape, info)));

    if (raw && in.has_contents() && has_any(in.contents()))
      return fail(InvalidArgument("gives typed contents while the request uses raw_input_contents; use one"));
    auto t = raw ? kserve::tensor_from_bytes(info.dtype, shape, request.raw_input_contents(position),
                                             "raw_input_contents[" + std::to_string(position) + "]'s size",
                                             request_owner)
                 : tensor_from_contents(info.dtype, shape, in.contents());
    if (!t.ok()) return fail(t.status());
    out.inputs[static_cast<size_t>(index)] = NamedTensor{info.name, std::move(*t)};
  }
  for (size_t i = 0; i < model.inputs.size(); ++i)
    if (!seen[i])
      return InvalidArgument("input '" + model.inputs[i].name + "' is missing (model '" + model.name +
                             "' takes " + names_of(model.inputs) + ")");

  std::vector<bool> requested(model.outputs.size(), false);
  for (const auto& o : request.outputs()) {
    const int index = model.output_index(o.name());
    if (index < 0)
      return InvalidArgument("requested output '" + o.name() + "' is not an output of model '" + model.name +
                             "' (its outputs: " + names_of(model.outputs) + ")");
    if (requested[static_cast<size_t>(index)])
      return InvalidArgument("output '" + o.name() + "' is requested twice");
    requested[static_cast<size_t>(index)] = true;
    out.outputs.push_back({o.name(), raw});
  }
  return out;
}

Status encode_infer_response(std::string_view model_name, const kserve::InferRequest& request,
                             std::span<const NamedTensor> outputs, inference::ModelInferResponse& response) {
  std::vector<const NamedTensor*> selected;
  if (request.outputs.empty()) {
    for (const NamedTensor& t : outputs) selected.push_back(&t);
  } else {
    for (const kserve::RequestedOutput& r : request.outputs) {
      const NamedTensor* found = nullptr;
      for (const NamedTensor& t : outputs)
        if (t.name == r.name) found = &t;
      if (!found) return Internal("the model returned no output named '" + r.name + "'");
      selected.push_back(found);
    }
  }
  bool raw = request.binary_outputs;
  for (const NamedTensor* n : selected) {
    const Tensor& t = n->tensor;
    if (t.memory_class() == MemoryClass::kDevice)
      return Internal("output '" + n->name + "' is in device memory; copy it to the host to encode it");
    if (t.dtype() != DType::kString && t.element_count() > 0 && t.data() == nullptr)
      return Internal("output '" + n->name + "' has no data");
    if (field_for(t.dtype()).empty()) raw = true;  // FP16/BF16 have no typed field
  }
  response.set_model_name(std::string(model_name));
  response.set_model_version("1");
  response.set_id(request.id);
  for (const NamedTensor* n : selected) {
    auto* o = response.add_outputs();
    o->set_name(n->name);
    o->set_datatype(str(kserve::datatype_name(n->tensor.dtype())));
    for (int64_t d : n->tensor.shape().dims()) o->add_shape(d);
    if (raw)
      kserve::append_tensor_bytes(*response.add_raw_output_contents(), n->tensor);
    else
      tensor_to_contents(n->tensor, *o->mutable_contents());
  }
  return Status::Ok();
}

void model_metadata(std::string_view name, const backend::ModelMetadata& md,
                    inference::ModelMetadataResponse& response) {
  static const std::vector<std::string> kVersions = {"1"};
  const nlohmann::json m = kserve::model_metadata(name, kVersions, md);  // the one platform mapping
  response.set_name(std::string(name));
  response.add_versions(kVersions[0]);
  response.set_platform(m.at("platform").get<std::string>());
  auto tensors = [](const std::vector<backend::TensorInfo>& infos, auto* list) {
    for (const auto& i : infos) {
      auto* t = list->Add();
      t->set_name(i.name);
      t->set_datatype(str(kserve::datatype_name(i.dtype)));
      for (int64_t d : i.shape.dims()) t->add_shape(d < 0 ? int64_t{-1} : d);
    }
  };
  tensors(md.inputs, response.mutable_inputs());
  tensors(md.outputs, response.mutable_outputs());
}

}  // namespace gantry::protocol::kserve_grpc
