#include "gantry/protocol/kserve_codec.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "gantry/core/json.h"
#include "kserve_elements.h"
#include "kserve_json_scan.h"

namespace gantry::protocol::kserve {
namespace {
using namespace internal;  // the pre-scan and the element converters

static_assert(std::endian::native == std::endian::little,
              "the binary tensor extension is little-endian; this codec copies bytes as they are");

using nlohmann::json;

struct DatatypeName {
  DType type;
  std::string_view name;
};

constexpr std::array<DatatypeName, 14> kDatatypes = {{
    {DType::kFloat32, "FP32"},
    {DType::kFloat16, "FP16"},
    {DType::kBFloat16, "BF16"},
    {DType::kFloat64, "FP64"},
    {DType::kInt8, "INT8"},
    {DType::kInt16, "INT16"},
    {DType::kInt32, "INT32"},
    {DType::kInt64, "INT64"},
    {DType::kUInt8, "UINT8"},
    {DType::kUInt16, "UINT16"},
    {DType::kUInt32, "UINT32"},
    {DType::kUInt64, "UINT64"},
    {DType::kBool, "BOOL"},
    {DType::kString, "BYTES"},
}};

std::string str(std::string_view s) { return std::string(s); }

// Fills `t` (allocated with as many elements as there are leaves) through `each(f)`, which calls
// f(leaf, flat_index) for every leaf in row-major order and stops at the first error f returns.
template <typename Each>
Status fill_elements(Each&& each, DType dtype, Tensor& t) {
  void* dst = t.data();
  return with_converter(
      dtype, [&](auto convert) { return each([&](const auto& v, size_t i) { return convert(v, i, dst); }); });
}

// Calls f(leaf, flat_index) for every non-array element of `data` in row-major order; arrays may nest at
// most `max_depth` deep (the shape's rank, or 1 for a flat list). Recursion is bounded by max_depth.
template <typename F>
Status for_each_leaf(const json& data, int max_depth, size_t& index, F&& f) {
  for (const json& e : data) {
    if (e.is_array()) {
      if (max_depth <= 1) return InvalidArgument("\"data\" is nested deeper than the shape's rank");
      GANTRY_RETURN_IF_ERROR(for_each_leaf(e, max_depth - 1, index, f));
    } else {
      GANTRY_RETURN_IF_ERROR(f(e, index));
      ++index;
    }
  }
  return Status::Ok();
}

// ---- request pieces -----------------------------------------------------------------------------------

std::string names_of(const std::vector<backend::TensorInfo>& infos) {
  std::string s;
  for (const auto& i : infos) s += (s.empty() ? "'" : ", '") + i.name + "'";
  return s.empty() ? "none" : s;
}

// Reads a non-negative integer (shape dims, binary_data_size).
std::optional<uint64_t> as_count(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  return std::nullopt;
}

Result<Shape> parse_shape(const json& input) {
  auto it = input.find("shape");
  if (it == input.end() || !it->is_array()) return InvalidArgument("\"shape\" must be an array of integers");
  std::vector<int64_t> dims;
  dims.reserve(it->size());
  for (const json& d : *it) {
    auto n = as_count(d);
    if (!n || *n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return InvalidArgument("\"shape\" dimensions must be non-negative integers, got " + describe(d));
    dims.push_back(static_cast<int64_t>(*n));
  }
  Shape shape(std::move(dims));
  if (!shape.element_count()) return InvalidArgument("shape " + shape.to_string() + " has too many elements");
  return shape;
}

// Splits BYTES binary data (4-byte little-endian length, then the bytes, per element).
Result<std::vector<std::string>> parse_binary_strings(std::string_view bytes, int64_t expected) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < bytes.size()) {
    if (bytes.size() - pos < 4)
      return InvalidArgument("BYTES element " + std::to_string(out.size()) +
                             " has a truncated length prefix (" + std::to_string(bytes.size() - pos) +
                             " of 4 bytes)");
    uint32_t len = 0;
    std::memcpy(&len, bytes.data() + pos, 4);
    pos += 4;
    if (len > bytes.size() - pos)
      return InvalidArgument("BYTES element " + std::to_string(out.size()) + " declares " +
                             std::to_string(len) + " bytes but only " + std::to_string(bytes.size() - pos) +
                             " remain in its binary_data_size");
    if (static_cast<int64_t>(out.size()) >= expected)
      return InvalidArgument("binary data holds more than the shape's " + std::to_string(expected) +
                             " BYTES elements");
    out.emplace_back(bytes.substr(pos, len));
    pos += len;
  }
  if (static_cast<int64_t>(out.size()) != expected)
    return InvalidArgument("binary data holds " + std::to_string(out.size()) +
                           " BYTES elements, the shape needs " + std::to_string(expected));
  return out;
}

// One input's JSON object resolved against the model, before its data is read.
struct PendingInput {
  const json* object = nullptr;
  size_t position = 0;  // in the request's "inputs"
  size_t model_index = 0;
  Shape shape;
  std::optional<uint64_t> binary_size;  // set for binary inputs
};

Result<Tensor> tensor_from_json(const PendingInput& in, DType dtype, const Prescan& prescan) {
  auto it = in.object->find("data");
  if (it == in.object->end()) return InvalidArgument("has neither \"data\" nor parameters.binary_data_size");
  const int max_depth = std::max<int>(1, static_cast<int>(in.shape.rank()));
  const uint64_t count = static_cast<uint64_t>(*in.shape.element_count());
  auto count_error = [&](size_t leaves) {
    return InvalidArgument("\"data\" has " + std::to_string(leaves) + " elements but shape " +
                           in.shape.to_string() + " needs " + std::to_string(count));
  };

  const FastArray* fast = nullptr;
  if (it->is_null() && in.position < prescan.data.size() && prescan.data[in.position])
    fast = &*prescan.data[in.position];
  if (fast) {
    if (fast->depth > max_depth) return InvalidArgument("\"data\" is nested deeper than the shape's rank");
    if (fast->leaves != count) return count_error(fast->leaves);
    if (dtype == DType::kString) {
      if (fast->leaves != 0)
        return InvalidArgument("element 0 is " + describe(fast->first) + ", expected a string");
      return Tensor::from_strings(in.shape, {});
    }
    if (count == 0) return Tensor::allocate(dtype, in.shape);
    if (fast->dtype == dtype) {  // converted while scanned: the buffer becomes the tensor
      GANTRY_RETURN_IF_ERROR(fast->error);
      return Tensor::adopt(dtype, in.shape, fast->bytes.get(), count * dtype_size(dtype), fast->bytes);
    }
    // Its "datatype" was not plainly written (so not read before the DOM): convert from the text now.
    GANTRY_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(dtype, in.shape));
    void* dst = t.data();
    GANTRY_RETURN_IF_ERROR(with_converter(dtype, [&](auto convert) {
      size_t pos = fast->begin, i = 0;
      int depth = 0;
      Status error;
      const bool scanned = scan_array(prescan.source, pos, depth, [&](const Leaf& leaf) {
        if (error.ok()) error = convert(leaf, i, dst);
        ++i;
      });
      if (!scanned || i != count)
        return Internal("\"data\" reads differently the second time (a bug in Gantry)");
      return error;
    }));
    return t;
  }

  if (!it->is_array()) return InvalidArgument("\"data\" must be a JSON array, got " + describe(*it));
  size_t leaves = 0;
  GANTRY_RETURN_IF_ERROR(
      for_each_leaf(*it, max_depth, leaves, [](const json&, size_t) { return Status::Ok(); }));
  if (leaves != count) return count_error(leaves);
  if (dtype == DType::kString) {
    std::vector<std::string> strings;
    strings.reserve(leaves);
    size_t index = 0;
    GANTRY_RETURN_IF_ERROR(for_each_leaf(*it, max_depth, index, [&](const json& v, size_t i) {
      if (!v.is_string())
        return InvalidArgument("element " + std::to_string(i) + " is " + describe(v) + ", expected a string");
      strings.push_back(v.get_ref<const std::string&>());
      return Status::Ok();
    }));
    return Tensor::from_strings(in.shape, std::move(strings));
  }
  GANTRY_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(dtype, in.shape));
  auto each = [&](auto&& f) {
    size_t index = 0;
    return for_each_leaf(*it, max_depth, index, f);
  };
  GANTRY_RETURN_IF_ERROR(fill_elements(each, dtype, t));
  return t;
}

Status parse_outputs(const json& request, const backend::ModelMetadata& model, InferRequest& out) {
  auto it = request.find("outputs");
  if (it == request.end() || it->is_null()) return Status::Ok();
  if (!it->is_array()) return InvalidArgument("\"outputs\" must be an array of {\"name\": ...} objects");
  std::vector<bool> seen(model.outputs.size(), false);
  for (const json& o : *it) {
    if (!o.is_object()) return InvalidArgument("each of \"outputs\" must be an object, got " + describe(o));
    auto name = o.find("name");
    if (name == o.end() || !name->is_string())
      return InvalidArgument("each of \"outputs\" needs a string \"name\"");
    const std::string& n = name->get_ref<const std::string&>();
    const int index = model.output_index(n);
    if (index < 0)
      return InvalidArgument("requested output '" + n + "' is not an output of model '" + model.name +
                             "' (its outputs: " + names_of(model.outputs) + ")");
    if (seen[static_cast<size_t>(index)]) return InvalidArgument("output '" + n + "' is requested twice");
    seen[static_cast<size_t>(index)] = true;
    RequestedOutput r{n, out.binary_outputs};
    if (auto p = o.find("parameters"); p != o.end() && !p->is_null()) {
      if (!p->is_object()) return InvalidArgument("output '" + n + "': \"parameters\" must be an object");
      if (auto b = p->find("binary_data"); b != p->end()) {
        if (!b->is_boolean())
          return InvalidArgument("output '" + n + "': parameters.binary_data must be true or false, got " +
                                 describe(*b));
        r.binary = b->get<bool>();
      }
    }
    out.outputs.push_back(std::move(r));
  }
  return Status::Ok();
}

// ---- response text ------------------------------------------------------------------------------------

// JSON string literal for `s`; nullopt when `s` is not valid UTF-8.
std::optional<std::string> json_string(std::string_view s) {
  try {
    return json(std::string(s)).dump();
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

std::string json_string_lossy(std::string_view s) {
  return json(std::string(s)).dump(-1, ' ', false, json::error_handler_t::replace);
}

template <typename F>
char* write_float(char* p, char* end, F v) {
  if (std::isnan(v)) return static_cast<char*>(std::memcpy(p, "NaN", 3)) + 3;
  if (std::isinf(v))
    return v > 0 ? static_cast<char*>(std::memcpy(p, "Infinity", 8)) + 8
                 : static_cast<char*>(std::memcpy(p, "-Infinity", 9)) + 9;
  // Shortest text that reads back as the same value; integral values get ".0" ("3.0", "-0.0") so they
  // read back as floats, keeping the sign of -0, as rapidjson (Triton) writes them.
  char* q = std::to_chars(p, end, v).ptr;
  for (const char* c = p; c < q; ++c)
    if (*c == '.' || *c == 'e') return q;
  *q++ = '.';
  *q++ = '0';
  return q;
}

// Appends the comma-separated elements of numeric tensor `t` to `out`.
void append_numbers(std::string& out, const ConstTensorView& t) {
  const size_t n = static_cast<size_t>(t.element_count());
  if (n == 0) return;
  // Longest element: a double ("-2.2250738585072014e-308", 24) or an int64 (20), plus the comma.
  constexpr size_t kMaxElement = 26;
  const size_t start = out.size();
  out.resize(start + n * kMaxElement);
  char* const begin = out.data() + start;
  char* const end = out.data() + out.size();
  char* p = begin;
  auto each = [&](auto&& write_one) {
    for (size_t i = 0; i < n; ++i) {
      if (i) *p++ = ',';
      p = write_one(i);
    }
  };
  visit_dtype(t.dtype(), [&]<DType D>(DTypeTag<D>) {
    using T = dtype_storage_t<D>;
    if constexpr (D == DType::kFloat32 || D == DType::kFloat64) {
      const T* v = t.values<T>().data();
      each([&](size_t i) { return write_float(p, end, v[i]); });
    } else if constexpr (D == DType::kFloat16 || D == DType::kBFloat16) {
      const T* v = t.values<T>().data();
      each([&](size_t i) {
        return write_float(p, end, D == DType::kFloat16 ? half_to_float(v[i]) : bfloat16_to_float(v[i]));
      });
    } else if constexpr (is_integer_dtype(D)) {
      using W = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
      const T* v = t.values<T>().data();
      each([&](size_t i) { return std::to_chars(p, end, static_cast<W>(v[i])).ptr; });
    } else if constexpr (D == DType::kBool) {
      const auto* v = static_cast<const uint8_t*>(t.data());
      each([&](size_t i) {
        return v[i] ? static_cast<char*>(std::memcpy(p, "true", 4)) + 4
                    : static_cast<char*>(std::memcpy(p, "false", 5)) + 5;
      });
    }
    // FP8 (KServe v2 has no FP8 datatype: never parsed, refused on output) and strings: nothing here.
  });
  out.resize(static_cast<size_t>(p - out.data()));
}

size_t binary_size(const ConstTensorView& t) {
  return t.dtype() == DType::kString ? t.byte_size() + 4 * t.strings().size() : t.byte_size();
}

}  // namespace

Status check_shape(const Shape& got, const backend::TensorInfo& info) {
  bool ok = got.rank() == info.shape.rank();
  for (size_t d = 0; ok && d < got.rank(); ++d) ok = info.shape[d] < 0 || info.shape[d] == got[d];
  if (ok) return Status::Ok();
  return InvalidArgument("shape " + got.to_string() + " does not match the model's " +
                         info.shape.to_string() + " (rank " + std::to_string(info.shape.rank()) +
                         ", '?' = any size)");
}

Result<Tensor> tensor_from_bytes(DType dtype, const Shape& shape, std::string_view bytes,
                                 std::string_view size_name, std::shared_ptr<const void> bytes_owner) {
  const int64_t count = shape.element_count().value_or(0);
  if (dtype == DType::kString) {
    GANTRY_ASSIGN_OR_RETURN(auto strings, parse_binary_strings(bytes, count));
    return Tensor::from_strings(shape, std::move(strings));
  }
  const size_t elem = dtype_size(dtype);
  if (static_cast<uint64_t>(count) > std::numeric_limits<uint64_t>::max() / elem ||
      static_cast<uint64_t>(count) * elem != bytes.size())
    return InvalidArgument(str(datatype_name(dtype)) + " shape " + shape.to_string() + " needs " +
                           (static_cast<uint64_t>(count) > std::numeric_limits<uint64_t>::max() / elem
                                ? std::string("more than 2^64")
                                : std::to_string(static_cast<uint64_t>(count) * elem)) +
                           " bytes but " + str(size_name) + " is " + std::to_string(bytes.size()));
  if (dtype == DType::kBool)
    for (size_t i = 0; i < bytes.size(); ++i)
      if (static_cast<uint8_t>(bytes[i]) > 1)
        return InvalidArgument("BOOL element " + std::to_string(i) + " is byte " +
                               std::to_string(static_cast<uint8_t>(bytes[i])) + ", expected 0 or 1");
  // Zero-copy when the bytes are aligned for the element type (they follow a JSON header of any length,
  // so often they are not: then one copy, which keeps typed access by backends well-defined).
  auto* data = const_cast<char*>(bytes.data());  // the tensor is an input: backends only read it
  if (bytes_owner && reinterpret_cast<uintptr_t>(data) % elem == 0)
    return Tensor::adopt(dtype, shape, data, bytes.size(),
                         std::const_pointer_cast<void>(std::move(bytes_owner)));
  GANTRY_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(dtype, shape));
  if (!bytes.empty()) std::memcpy(t.data(), data, bytes.size());
  return t;
}

void append_tensor_bytes(std::string& out, const ConstTensorView& t) {
  if (t.dtype() == DType::kString) {
    for (const std::string& s : t.strings()) {
      const auto len = static_cast<uint32_t>(s.size());
      out.append(reinterpret_cast<const char*>(&len), 4);
      out.append(s);
    }
    return;
  }
  if (t.dtype() == DType::kBool) {
    const auto* v = static_cast<const uint8_t*>(t.data());
    for (int64_t i = 0; i < t.element_count(); ++i) out.push_back(v[i] ? 1 : 0);
    return;
  }
  if (t.byte_size() > 0) out.append(static_cast<const char*>(t.data()), t.byte_size());
}

std::string_view datatype_name(DType t) {
  for (const auto& d : kDatatypes)
    if (d.type == t) return d.name;
  return "UNKNOWN";
}

std::optional<DType> parse_datatype(std::string_view name) {
  for (const auto& d : kDatatypes)
    if (d.name == name) return d.type;
  return std::nullopt;
}

Result<InferRequest> parse_infer_request(std::string_view body, std::optional<size_t> json_length,
                                         const backend::ModelMetadata& model,
                                         std::shared_ptr<const void> body_owner) {
  std::string_view header = body;
  std::string_view binary;
  if (json_length) {
    if (*json_length > body.size())
      return InvalidArgument("Inference-Header-Content-Length is " + std::to_string(*json_length) +
                             " but the body has only " + std::to_string(body.size()) + " bytes");
    header = body.substr(0, *json_length);
    binary = body.substr(*json_length);
  }
  // The depth limit holds for the text the client sent, "data" arrays the pre-scan takes out included.
  GANTRY_RETURN_IF_ERROR(check_json_depth(header, "inference request"));
  Prescan prescan = prescan_numeric_data(header);
  const std::string_view text = prescan.rewritten ? std::string_view(prescan.text) : header;
  auto parsed = parse_json(text, "inference request", client_json_limits(text));
  if (!parsed.ok()) {
    // Report positions in the text the client sent, not in the rewritten one.
    if (!prescan.rewritten) return parsed.status();
    if (auto error = json_syntax_error(header))
      return InvalidArgument("inference request: not valid JSON: " + *error);
    return Internal("inference request: the numeric pre-scan broke valid JSON (a bug in Gantry)");
  }
  const json& request = *parsed;
  if (!request.is_object()) return InvalidArgument("the inference request must be a JSON object");

  InferRequest out;
  if (auto id = request.find("id"); id != request.end() && !id->is_null()) {
    if (!id->is_string()) return InvalidArgument("\"id\" must be a string, got " + describe(*id));
    out.id = id->get<std::string>();
  }
  if (auto p = request.find("parameters"); p != request.end() && !p->is_null()) {
    if (!p->is_object()) return InvalidArgument("\"parameters\" must be an object, got " + describe(*p));
    if (auto b = p->find("binary_data_output"); b != p->end()) {
      if (!b->is_boolean())
        return InvalidArgument("parameters.binary_data_output must be true or false, got " + describe(*b));
      out.binary_outputs = b->get<bool>();
    }
    out.parameters = *p;
  }

  auto inputs = request.find("inputs");
  if (inputs == request.end() || !inputs->is_array())
    return InvalidArgument("the inference request needs an \"inputs\" array (model '" + model.name +
                           "' takes " + names_of(model.inputs) + ")");

  // Resolve every input against the model first (names, datatypes, shapes, where its data is).
  std::vector<PendingInput> pending;
  pending.reserve(inputs->size());
  std::vector<int> seen(model.inputs.size(), -1);
  for (size_t position = 0; position < inputs->size(); ++position) {
    const json& in = (*inputs)[position];
    if (!in.is_object()) return InvalidArgument("each of \"inputs\" must be an object, got " + describe(in));
    auto name_it = in.find("name");
    if (name_it == in.end() || !name_it->is_string())
      return InvalidArgument("each of \"inputs\" needs a string \"name\"");
    const std::string& name = name_it->get_ref<const std::string&>();
    auto fail = [&](const Status& s) { return s.with_context("input '" + name + "'"); };
    const int index = model.input_index(name);
    if (index < 0)
      return InvalidArgument("input '" + name + "' is not an input of model '" + model.name +
                             "' (its inputs: " + names_of(model.inputs) + ")");
    if (seen[static_cast<size_t>(index)] >= 0) return InvalidArgument("input '" + name + "' is given twice");
    seen[static_cast<size_t>(index)] = static_cast<int>(pending.size());
    const backend::TensorInfo& info = model.inputs[static_cast<size_t>(index)];

    auto dt = in.find("datatype");
    if (dt == in.end() || !dt->is_string())
      return fail(InvalidArgument("needs a \"datatype\" string (the model expects " +
                                  str(datatype_name(info.dtype)) + ")"));
    const std::string& dt_name = dt->get_ref<const std::string&>();
    auto dtype = parse_datatype(dt_name);
    if (!dtype)
      return fail(InvalidArgument("unknown datatype \"" + dt_name + "\" (the model expects " +
                                  str(datatype_name(info.dtype)) + ")"));
    if (*dtype != info.dtype)
      return fail(InvalidArgument("datatype " + dt_name + " does not match the model's " +
                                  str(datatype_name(info.dtype))));
    auto shape = parse_shape(in);
    if (!shape.ok()) return fail(shape.status());
    GANTRY_RETURN_IF_ERROR(fail(check_shape(*shape, info)));

    PendingInput p{&in, position, static_cast<size_t>(index), std::move(*shape), std::nullopt};
    if (auto params = in.find("parameters"); params != in.end() && !params->is_null()) {
      if (!params->is_object()) return fail(InvalidArgument("\"parameters\" must be an object"));
      if (auto size = params->find("binary_data_size"); size != params->end()) {
        p.binary_size = as_count(*size);
        if (!p.binary_size)
          return fail(InvalidArgument("parameters.binary_data_size must be a non-negative integer, got " +
                                      describe(*size)));
        if (in.contains("data"))
          return fail(InvalidArgument("gives both \"data\" and parameters.binary_data_size; send one"));
        if (!json_length)
          return fail(InvalidArgument(
              "has parameters.binary_data_size but the request has no Inference-Header-Content-Length "
              "header to say where the JSON ends"));
      }
    }
    pending.push_back(std::move(p));
  }
  for (size_t i = 0; i < model.inputs.size(); ++i)
    if (seen[i] < 0)
      return InvalidArgument("input '" + model.inputs[i].name + "' is missing (model '" + model.name +
                             "' takes " + names_of(model.inputs) + ")");

  // Binary data follows the JSON in the order the inputs appear in the request.
  std::vector<std::string_view> slices(pending.size());
  size_t offset = 0;
  for (size_t i = 0; i < pending.size(); ++i) {
    if (!pending[i].binary_size) continue;
    const uint64_t size = *pending[i].binary_size;
    const size_t left = binary.size() - offset;
    if (size > left)
      return InvalidArgument(
          "input '" + model.inputs[pending[i].model_index].name + "': binary_data_size is " +
          std::to_string(size) + " bytes but only " + std::to_string(left) +
          " bytes of binary data remain (truncated body: " + std::to_string(binary.size()) +
          " bytes follow the " + std::to_string(header.size()) + "-byte JSON header)");
    slices[i] = binary.substr(offset, static_cast<size_t>(size));
    offset += static_cast<size_t>(size);
  }
  if (offset != binary.size())
    return InvalidArgument(
        std::to_string(binary.size()) + " bytes follow the " + std::to_string(header.size()) +
        "-byte JSON header but the inputs' binary_data_size add up to " + std::to_string(offset));

  out.inputs.resize(model.inputs.size());
  for (size_t i = 0; i < pending.size(); ++i) {
    const PendingInput& p = pending[i];
    const backend::TensorInfo& info = model.inputs[p.model_index];
    auto t = p.binary_size ? tensor_from_bytes(info.dtype, p.shape, slices[i], "binary_data_size", body_owner)
                           : tensor_from_json(p, info.dtype, prescan);
    if (!t.ok()) return t.status().with_context("input '" + info.name + "'");
    out.inputs[p.model_index] = NamedTensor{info.name, std::move(*t)};
  }

  GANTRY_RETURN_IF_ERROR(parse_outputs(request, model, out));
  return out;
}

Result<EncodedResponse> encode_infer_response(std::string_view model_name, std::string_view model_version,
                                              const InferRequest& request,
                                              std::span<const NamedTensor> outputs) {
  // Which tensors, in which order, binary or not.
  struct Selected {
    const NamedTensor* tensor;
    bool binary;
  };
  std::vector<Selected> selected;
  if (request.outputs.empty()) {
    for (const NamedTensor& t : outputs) selected.push_back({&t, request.binary_outputs});
  } else {
    for (const RequestedOutput& r : request.outputs) {
      const NamedTensor* found = nullptr;
      for (const NamedTensor& t : outputs)
        if (t.name == r.name) found = &t;
      if (!found) return Internal("the model returned no output named '" + r.name + "'");
      selected.push_back({found, r.binary});
    }
  }

  size_t estimate = 128;
  for (const Selected& s : selected) {
    const Tensor& t = s.tensor->tensor;
    if (t.memory_class() == MemoryClass::kDevice)
      return Internal("output '" + s.tensor->name +
                      "' is in device memory; copy it to the host to encode it");
    if (t.dtype() != DType::kString && t.element_count() > 0 && t.data() == nullptr)
      return Internal("output '" + s.tensor->name + "' has no data");
    estimate += 96 + s.tensor->name.size() +
                (s.binary ? binary_size(t) : static_cast<size_t>(t.element_count()) * 12 + t.byte_size());
  }

  EncodedResponse response;
  std::string& out = response.body;
  out.reserve(estimate);
  out += "{\"model_name\":";
  out += json_string_lossy(model_name);
  if (!model_version.empty()) {
    out += ",\"model_version\":";
    out += json_string_lossy(model_version);
  }
  if (!request.id.empty()) {
    out += ",\"id\":";
    out += json_string_lossy(request.id);
  }
  out += ",\"outputs\":[";
  bool any_binary = false;
  for (size_t k = 0; k < selected.size(); ++k) {
    const NamedTensor& nt = *selected[k].tensor;
    const Tensor& t = nt.tensor;
    if (k) out += ',';
    out += "{\"name\":";
    out += json_string_lossy(nt.name);
    out += ",\"datatype\":\"";
    out += datatype_name(t.dtype());
    out += "\",\"shape\":[";
    for (size_t d = 0; d < t.shape().rank(); ++d) {
      if (d) out += ',';
      out += std::to_string(t.shape()[d]);
    }
    out += ']';
    if (selected[k].binary) {
      any_binary = true;
      out += ",\"parameters\":{\"binary_data_size\":";
      out += std::to_string(binary_size(t));
      out += "}}";
      continue;
    }
    out += ",\"data\":[";
    if (t.dtype() == DType::kString) {
      const auto& strings = t.strings();
      for (size_t i = 0; i < strings.size(); ++i) {
        auto s = json_string(strings[i]);
        if (!s)
          return InvalidArgument(
              "output '" + nt.name + "' element " + std::to_string(i) +
              " is not valid UTF-8, so it cannot be a JSON string; request the output with "
              "parameters {\"binary_data\": true}");
        if (i) out += ',';
        out += *s;
      }
    } else {
      append_numbers(out, t);
    }
    out += "]}";
  }
  out += "]}";
  if (any_binary) {
    response.json_length = out.size();
    for (const Selected& s : selected)
      if (s.binary) append_tensor_bytes(out, s.tensor->tensor);
  }
  return response;
}

nlohmann::json model_metadata(std::string_view name, std::span<const std::string> versions,
                              const backend::ModelMetadata& md) {
  auto tensors = [](const std::vector<backend::TensorInfo>& infos) {
    json list = json::array();
    for (const auto& i : infos) {
      json shape = json::array();
      for (int64_t d : i.shape.dims()) shape.push_back(d < 0 ? int64_t{-1} : d);
      list.push_back({{"name", i.name}, {"datatype", datatype_name(i.dtype)}, {"shape", std::move(shape)}});
    }
    return list;
  };
  const std::string& platform = md.platform.empty() ? md.backend : md.platform;
  return json{{"name", std::string(name)},
              {"versions", json(std::vector<std::string>(versions.begin(), versions.end()))},
              {"platform", platform},
              {"inputs", tensors(md.inputs)},
              {"outputs", tensors(md.outputs)}};
}

std::string error_body(std::string_view message) {
  return json{{"error", std::string(message)}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace gantry::protocol::kserve
