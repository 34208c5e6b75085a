#include "gantry/protocol/kserve_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gantry/core/json.h"

namespace gantry::protocol::kserve {
namespace {

using nlohmann::json;

backend::TensorInfo info(std::string name, DType dtype, Shape shape) {
  backend::TensorInfo i;
  i.name = std::move(name);
  i.dtype = dtype;
  i.shape = std::move(shape);
  i.dim_names.assign(i.shape.rank(), "");
  return i;
}

// A model with one input "in" and one output "out" of `dtype`, both [?].
backend::ModelMetadata single(DType dtype) {
  backend::ModelMetadata m;
  m.name = "single";
  m.backend = "onnxruntime";
  m.inputs = {info("in", dtype, Shape{Shape::kDynamic})};
  m.outputs = {info("out", dtype, Shape{Shape::kDynamic})};
  return m;
}

// x: FP32 [?,3]; ids: INT64 [?]; text: BYTES [?]; h: FP16 [2]. Outputs y, z, w.
backend::ModelMetadata multi() {
  backend::ModelMetadata m;
  m.name = "multi";
  m.backend = "onnxruntime";
  m.platform = "onnx_onnxv1";
  m.inputs = {info("x", DType::kFloat32, Shape{Shape::kDynamic, 3}),
              info("ids", DType::kInt64, Shape{Shape::kDynamic}),
              info("text", DType::kString, Shape{Shape::kDynamic}), info("h", DType::kFloat16, Shape{2})};
  m.outputs = {info("y", DType::kFloat32, Shape{Shape::kDynamic, 3}),
               info("z", DType::kInt64, Shape{Shape::kDynamic}),
               info("w", DType::kString, Shape{Shape::kDynamic})};
  return m;
}

json multi_inputs() {
  return json::array({
      {{"name", "x"}, {"datatype", "FP32"}, {"shape", {1, 3}}, {"data", {1, 2, 3}}},
      {{"name", "ids"}, {"datatype", "INT64"}, {"shape", {2}}, {"data", {7, 8}}},
      {{"name", "text"}, {"datatype", "BYTES"}, {"shape", {1}}, {"data", {"hi"}}},
      {{"name", "h"}, {"datatype", "FP16"}, {"shape", {2}}, {"data", {1.0, 0.5}}},
  });
}

// Parses `body` (all JSON) against `model` and returns the status's message; fails the test when it parses.
std::string error_of(const json& request, const backend::ModelMetadata& model) {
  auto r = parse_infer_request(request.dump(), std::nullopt, model);
  EXPECT_FALSE(r.ok()) << request.dump();
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().to_string();
  return r.status().message();
}

#define EXPECT_HAS(text, phrase)                               \
  do {                                                         \
    const std::string text_ = (text);                          \
    EXPECT_NE(text_.find(phrase), std::string::npos) << text_; \
  } while (0)

template <typename T>
std::string raw_bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

std::string length_prefixed(const std::vector<std::string>& strings) {
  std::string out;
  for (const auto& s : strings) {
    const auto n = static_cast<uint32_t>(s.size());
    out.append(reinterpret_cast<const char*>(&n), 4);
    out += s;
  }
  return out;
}

// The JSON part of an encoded response.
json response_json(const EncodedResponse& r) {
  return json::parse(r.json_length ? r.body.substr(0, *r.json_length) : r.body);
}

// ---- datatypes ----------------------------------------------------------------------------------------

TEST(KServeDatatype, NamesRoundTripForEveryDType) {
  const std::vector<std::pair<DType, std::string>> all = {
      {DType::kFloat32, "FP32"},  {DType::kFloat16, "FP16"},  {DType::kBFloat16, "BF16"},
      {DType::kFloat64, "FP64"},  {DType::kInt8, "INT8"},     {DType::kInt16, "INT16"},
      {DType::kInt32, "INT32"},   {DType::kInt64, "INT64"},   {DType::kUInt8, "UINT8"},
      {DType::kUInt16, "UINT16"}, {DType::kUInt32, "UINT32"}, {DType::kUInt64, "UINT64"},
      {DType::kBool, "BOOL"},     {DType::kString, "BYTES"}};
  for (const auto& [t, name] : all) {
    EXPECT_EQ(datatype_name(t), name);
    ASSERT_TRUE(parse_datatype(name).has_value()) << name;
    EXPECT_EQ(*parse_datatype(name), t) << name;
  }
  EXPECT_FALSE(parse_datatype("fp32").has_value());  // case-sensitive, as the protocol says
  EXPECT_FALSE(parse_datatype("FLOAT").has_value());
  EXPECT_FALSE(parse_datatype("").has_value());
}

// ---- round trips per dtype ----------------------------------------------------------------------------

// JSON in -> tensor -> JSON out, and binary in -> tensor -> binary out, for one numeric dtype.
template <typename T>
void round_trip(DType dtype, const std::vector<T>& values) {
  SCOPED_TRACE(std::string(datatype_name(dtype)));
  const auto model = single(dtype);
  const std::string name(datatype_name(dtype));
  json data = json::array();
  for (T v : values) data.push_back(v);
  // JSON request and JSON response.
  json request = {
      {"inputs", {{{"name", "in"}, {"datatype", name}, {"shape", {values.size()}}, {"data", data}}}}};
  auto parsed = parse_infer_request(request.dump(), std::nullopt, model);
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  ASSERT_EQ(parsed->inputs.size(), 1u);
  const Tensor& t = parsed->inputs[0].tensor;
  EXPECT_EQ(parsed->inputs[0].name, "in");
  EXPECT_EQ(t.dtype(), dtype);
  EXPECT_EQ(t.shape(), Shape{static_cast<int64_t>(values.size())});
  ASSERT_EQ(t.byte_size(), values.size() * sizeof(T));
  EXPECT_EQ(std::memcmp(t.data(), values.data(), t.byte_size()), 0);

  std::vector<NamedTensor> outputs = {{"out", t}};
  auto encoded = encode_infer_response("single", "", *parsed, outputs);
  ASSERT_TRUE(encoded.ok()) << encoded.status().to_string();
  EXPECT_FALSE(encoded->json_length.has_value());
  json back = json::parse(encoded->body);
  ASSERT_EQ(back["outputs"].size(), 1u);
  EXPECT_EQ(back["outputs"][0]["datatype"], name);
  EXPECT_EQ(back["outputs"][0]["shape"], json::array({values.size()}));
  const json& back_data = back["outputs"][0]["data"];
  ASSERT_EQ(back_data.size(), values.size()) << encoded->body;
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(back_data[i].is_number_float(), std::is_floating_point_v<T>) << back_data[i];
    EXPECT_EQ(back_data[i].get<T>(), values[i]) << encoded->body;
  }

  // Binary request and binary response.
  json binary_request = {{"inputs",
                          {{{"name", "in"},
                            {"datatype", name},
                            {"shape", {values.size()}},
                            {"parameters", {{"binary_data_size", values.size() * sizeof(T)}}}}}},
                         {"parameters", {{"binary_data_output", true}}}};
  const std::string header = binary_request.dump();
  const std::string body = header + raw_bytes(values);
  auto bin = parse_infer_request(body, header.size(), model);
  ASSERT_TRUE(bin.ok()) << bin.status().to_string();
  EXPECT_TRUE(bin->binary_outputs);
  const Tensor& bt = bin->inputs[0].tensor;
  ASSERT_EQ(bt.byte_size(), values.size() * sizeof(T));
  EXPECT_EQ(std::memcmp(bt.data(), values.data(), bt.byte_size()), 0);
  std::vector<NamedTensor> bin_outputs = {{"out", bt}};
  auto bin_encoded = encode_infer_response("single", "1", *bin, bin_outputs);
  ASSERT_TRUE(bin_encoded.ok()) << bin_encoded.status().to_string();
  ASSERT_TRUE(bin_encoded->json_length.has_value());
  json bin_back = response_json(*bin_encoded);
  EXPECT_EQ(bin_back["model_version"], "1");
  EXPECT_EQ(bin_back["outputs"][0]["parameters"]["binary_data_size"], values.size() * sizeof(T));
  EXPECT_FALSE(bin_back["outputs"][0].contains("data"));
  EXPECT_EQ(bin_encoded->body.substr(*bin_encoded->json_length), raw_bytes(values));
}

TEST(KServeRoundTrip, EveryNumericDType) {
  round_trip<float>(DType::kFloat32, {1.5f, -0.1f, 3.4028235e38f, 1e-45f, 0.0f, 1.0f / 3.0f});
  round_trip<double>(DType::kFloat64, {0.1, -2.5e-300, 1.7976931348623157e308, 1.0 / 3.0});
  round_trip<int8_t>(DType::kInt8, {-128, 127, 0, -1});
  round_trip<int16_t>(DType::kInt16, {-32768, 32767, 5});
  round_trip<int32_t>(DType::kInt32,
                      {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()});
  round_trip<int64_t>(DType::kInt64,
                      {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), 0});
  round_trip<uint8_t>(DType::kUInt8, {0, 255, 17});
  round_trip<uint16_t>(DType::kUInt16, {0, 65535});
  round_trip<uint32_t>(DType::kUInt32, {0, 4294967295u});
  round_trip<uint64_t>(DType::kUInt64, {0, std::numeric_limits<uint64_t>::max()});
}

TEST(KServeRoundTrip, Bool) {
  const auto model = single(DType::kBool);
  json request = {
      {"inputs", {{{"name", "in"}, {"datatype", "BOOL"}, {"shape", {3}}, {"data", {true, false, true}}}}}};
  auto parsed = parse_infer_request(request.dump(), std::nullopt, model);
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  const auto* v = static_cast<const uint8_t*>(parsed->inputs[0].tensor.data());
  EXPECT_EQ(v[0], 1);
  EXPECT_EQ(v[1], 0);
  EXPECT_EQ(v[2], 1);
  std::vector<NamedTensor> outputs = {{"out", parsed->inputs[0].tensor}};
  auto encoded = encode_infer_response("single", "", *parsed, outputs);
  ASSERT_TRUE(encoded.ok());
  EXPECT_EQ(json::parse(encoded->body)["outputs"][0]["data"], json::array({true, false, true}));

  json bin = {
      {"inputs",
       {{{"name", "in"}, {"datatype", "BOOL"}, {"shape", {3}}, {"parameters", {{"binary_data_size", 3}}}}}}};
  const std::string header = bin.dump();
  const std::string body = header + std::string("\x00\x01\x01", 3);  // outlives the views into it
  auto b = parse_infer_request(body, header.size(), model);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  const auto* bv = static_cast<const uint8_t*>(b->inputs[0].tensor.data());
  EXPECT_EQ(bv[0], 0);
  EXPECT_EQ(bv[1], 1);
  EXPECT_EQ(bv[2], 1);
}

TEST(KServeRoundTrip, BytesBothWays) {
  const auto model = single(DType::kString);
  const std::vector<std::string> strings = {"hello", "", std::string("a\0b", 3), "\xc3\xbcn\xc3\xaf"};
  json request = {{"inputs", {{{"name", "in"}, {"datatype", "BYTES"}, {"shape", {4}}, {"data", strings}}}}};
  auto parsed = parse_infer_request(request.dump(), std::nullopt, model);
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  EXPECT_EQ(parsed->inputs[0].tensor.dtype(), DType::kString);
  EXPECT_EQ(parsed->inputs[0].tensor.strings(), strings);
  std::vector<NamedTensor> outputs = {{"out", parsed->inputs[0].tensor}};
  auto encoded = encode_infer_response("single", "", *parsed, outputs);
  ASSERT_TRUE(encoded.ok()) << encoded.status().to_string();
  EXPECT_EQ(json::parse(encoded->body)["outputs"][0]["data"].get<std::vector<std::string>>(), strings);

  // Binary, including bytes that are not UTF-8.
  const std::vector<std::string> raw = {"\xff\xfe", "", "abc"};
  json bin = {{"inputs",
               {{{"name", "in"},
                 {"datatype", "BYTES"},
                 {"shape", {3}},
                 {"parameters", {{"binary_data_size", length_prefixed(raw).size()}}}}}},
              {"outputs", {{{"name", "out"}, {"parameters", {{"binary_data", true}}}}}}};
  const std::string header = bin.dump();
  auto b = parse_infer_request(header + length_prefixed(raw), header.size(), model);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(b->inputs[0].tensor.strings(), raw);
  std::vector<NamedTensor> bin_outputs = {{"out", b->inputs[0].tensor}};
  auto be = encode_infer_response("single", "", *b, bin_outputs);
  ASSERT_TRUE(be.ok()) << be.status().to_string();
  ASSERT_TRUE(be->json_length.has_value());
  EXPECT_EQ(be->body.substr(*be->json_length), length_prefixed(raw));
  EXPECT_EQ(response_json(*be)["outputs"][0]["parameters"]["binary_data_size"], length_prefixed(raw).size());

  // The same non-UTF-8 strings cannot be JSON strings: the encoder says how to get them.
  InferRequest as_json = *b;
  as_json.outputs[0].binary = false;
  auto bad = encode_infer_response("single", "", as_json, bin_outputs);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_HAS(bad.status().message(), "not valid UTF-8");
  EXPECT_HAS(bad.status().message(), "binary_data");
}

TEST(KServeRoundTrip, NestedDataEqualsFlat) {
  backend::ModelMetadata m = single(DType::kFloat32);
  m.inputs[0].shape = Shape{Shape::kDynamic, 3};
  json nested = {
      {"inputs",
       {{{"name", "in"}, {"datatype", "FP32"}, {"shape", {2, 3}}, {"data", {{1, 2, 3}, {4, 5, 6}}}}}}};
  auto p = parse_infer_request(nested.dump(), std::nullopt, m);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  auto v = p->inputs[0].tensor.values<float>();
  EXPECT_EQ(std::vector<float>(v.begin(), v.end()), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(p->inputs[0].tensor.shape(), (Shape{2, 3}));
}

TEST(KServeRoundTrip, ScalarInput) {
  backend::ModelMetadata m = single(DType::kInt32);
  m.inputs[0].shape = Shape{};
  json r = {{"inputs", {{{"name", "in"}, {"datatype", "INT32"}, {"shape", json::array()}, {"data", {42}}}}}};
  auto p = parse_infer_request(r.dump(), std::nullopt, m);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->inputs[0].tensor.values<int32_t>()[0], 42);
}

// ---- 16-bit floats ------------------------------------------------------------------------------------

std::vector<uint16_t> parse_16(DType dtype, const json& data) {
  const auto model = single(dtype);
  json r = {{"inputs",
             {{{"name", "in"},
               {"datatype", std::string(datatype_name(dtype))},
               {"shape", {data.size()}},
               {"data", data}}}}};
  auto p = parse_infer_request(r.dump(), std::nullopt, model);
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  if (!p.ok()) return {};
  auto v = p->inputs[0].tensor.values<uint16_t>();
  return {v.begin(), v.end()};
}

TEST(KServeHalf, Fp16FromJsonRoundsToNearestEven) {
  const double one_plus_half_ulp = 1.0 + std::ldexp(1.0, -11);        // tie between 0x3C00 and 0x3C01
  const double one_plus_3_half_ulp = 1.0 + 3 * std::ldexp(1.0, -11);  // tie between 0x3C01 and 0x3C02
  const double just_above_tie = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  auto bits = parse_16(
      DType::kFloat16,
      json::array({1.0, 65504.0, -2.0, std::ldexp(1.0, -24), 0.1, one_plus_half_ulp, one_plus_3_half_ulp,
                   just_above_tie, 65519.0, 0.0, -0.0, std::ldexp(1.0, -26), std::ldexp(3.0, -25)}));
  EXPECT_EQ(bits, (std::vector<uint16_t>{0x3C00, 0x7BFF, 0xC000, 0x0001, 0x2E66, 0x3C00, 0x3C02, 0x3C01,
                                         0x7BFF, 0x0000, 0x8000, 0x0000, 0x0002}));
}

TEST(KServeHalf, Bf16FromJsonRoundsToNearestEven) {
  auto bits = parse_16(DType::kBFloat16, json::array({1.0, 0.1, 1.0 + std::ldexp(1.0, -8),
                                                      1.0 + 3 * std::ldexp(1.0, -8), -3.0, 3.38e38}));
  EXPECT_EQ(bits, (std::vector<uint16_t>{0x3F80, 0x3DCD, 0x3F80, 0x3F82, 0xC040, 0x7F7E}));
}

TEST(KServeHalf, EncodesAsNumbersThatReadBackToTheSameBits) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    const auto model = single(dtype);
    // Every finite bit pattern with a spread of exponents.
    std::vector<uint16_t> patterns;
    for (uint32_t b = 0; b < 0x10000; b += 97) {
      const bool finite = dtype == DType::kFloat16 ? (b & 0x7C00) != 0x7C00 : (b & 0x7F80) != 0x7F80;
      if (finite) patterns.push_back(static_cast<uint16_t>(b));
    }
    auto t = Tensor::from_values(dtype, Shape{static_cast<int64_t>(patterns.size())}, patterns);
    ASSERT_TRUE(t.ok());
    InferRequest req;
    std::vector<NamedTensor> outputs = {{"out", *t}};
    auto e = encode_infer_response("single", "", req, outputs);
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    json data = json::parse(e->body)["outputs"][0]["data"];
    ASSERT_EQ(data.size(), patterns.size());
    for (const auto& d : data) EXPECT_TRUE(d.is_number());
    EXPECT_EQ(parse_16(dtype, data), patterns) << datatype_name(dtype);
  }
}

TEST(KServeHalf, BinaryIsRaw) {
  const auto model = single(DType::kFloat16);
  const std::vector<uint16_t> raw = {0x3C00, 0x7E00, 0xFC00};  // 1, NaN, -inf: only binary can carry these
  json r = {
      {"inputs",
       {{{"name", "in"}, {"datatype", "FP16"}, {"shape", {3}}, {"parameters", {{"binary_data_size", 6}}}}}}};
  const std::string header = r.dump();
  const std::string body = header + raw_bytes(raw);  // outlives the views into it
  auto p = parse_infer_request(body, header.size(), model);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  auto v = p->inputs[0].tensor.values<uint16_t>();
  EXPECT_EQ(std::vector<uint16_t>(v.begin(), v.end()), raw);
}

// ---- validation errors --------------------------------------------------------------------------------

TEST(KServeValidation, ValidMultiInputRequestComesBackInModelOrder) {
  json inputs = multi_inputs();
  std::swap(inputs[0], inputs[3]);  // request order differs from the model's
  auto p = parse_infer_request(json{{"inputs", inputs}}.dump(), std::nullopt, multi());
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_EQ(p->inputs.size(), 4u);
  EXPECT_EQ(p->inputs[0].name, "x");
  EXPECT_EQ(p->inputs[1].name, "ids");
  EXPECT_EQ(p->inputs[2].name, "text");
  EXPECT_EQ(p->inputs[3].name, "h");
  EXPECT_EQ(p->inputs[1].tensor.values<int64_t>()[1], 8);
  EXPECT_TRUE(p->outputs.empty());
  EXPECT_TRUE(p->id.empty());
  EXPECT_TRUE(p->parameters.is_null());
}

TEST(KServeValidation, InputNames) {
  const auto m = multi();
  json unknown = multi_inputs();
  unknown[1]["name"] = "idz";
  auto msg = error_of({{"inputs", unknown}}, m);
  EXPECT_HAS(msg, "'idz' is not an input of model 'multi'");
  EXPECT_HAS(msg, "'ids'");  // lists what it takes

  json missing = multi_inputs();
  missing.erase(2);
  EXPECT_HAS(error_of({{"inputs", missing}}, m), "input 'text' is missing");

  json twice = multi_inputs();
  const json first = twice[0];
  twice.push_back(first);
  EXPECT_HAS(error_of({{"inputs", twice}}, m), "input 'x' is given twice");

  EXPECT_HAS(error_of(json{{"id", "1"}}, m), "needs an \"inputs\" array");
  EXPECT_HAS(error_of(json::array(), m), "must be a JSON object");
}

TEST(KServeValidation, DatatypeAndShape) {
  const auto m = multi();
  json wrong_type = multi_inputs();
  wrong_type[0]["datatype"] = "FP64";
  auto msg = error_of({{"inputs", wrong_type}}, m);
  EXPECT_HAS(msg, "input 'x'");
  EXPECT_HAS(msg, "datatype FP64 does not match the model's FP32");

  json unknown_type = multi_inputs();
  unknown_type[0]["datatype"] = "FLOAT32";
  EXPECT_HAS(error_of({{"inputs", unknown_type}}, m), "unknown datatype \"FLOAT32\"");

  json rank = multi_inputs();
  rank[0]["shape"] = {3};
  msg = error_of({{"inputs", rank}}, m);
  EXPECT_HAS(msg, "input 'x'");
  EXPECT_HAS(msg, "shape [3] does not match the model's [?,3]");

  json dim = multi_inputs();
  dim[0]["shape"] = {1, 4};
  dim[0]["data"] = {1, 2, 3, 4};
  EXPECT_HAS(error_of({{"inputs", dim}}, m), "shape [1,4] does not match the model's [?,3]");

  json fixed = multi_inputs();
  fixed[3]["shape"] = {3};
  fixed[3]["data"] = {1, 2, 3};
  EXPECT_HAS(error_of({{"inputs", fixed}}, m), "does not match the model's [2]");

  json negative = multi_inputs();
  negative[0]["shape"] = {-1, 3};
  EXPECT_HAS(error_of({{"inputs", negative}}, m), "non-negative integers");

  json huge = multi_inputs();
  huge[0]["shape"] = {std::numeric_limits<int64_t>::max(), 3};
  EXPECT_HAS(error_of({{"inputs", huge}}, m), "too many elements");

  json no_shape = multi_inputs();
  no_shape[0].erase("shape");
  EXPECT_HAS(error_of({{"inputs", no_shape}}, m), "\"shape\" must be an array");
}

TEST(KServeValidation, DataCountsAndNesting) {
  const auto m = multi();
  json count = multi_inputs();
  count[0]["shape"] = {2, 3};
  count[0]["data"] = {1, 2, 3, 4, 5};
  auto msg = error_of({{"inputs", count}}, m);
  EXPECT_HAS(msg, "input 'x'");
  EXPECT_HAS(msg, "\"data\" has 5 elements but shape [2,3] needs 6");

  json deep = multi_inputs();
  deep[1]["data"] = json::parse("[[7], [8]]");  // ids has rank 1
  EXPECT_HAS(error_of({{"inputs", deep}}, m), "nested deeper than the shape's rank");

  json none = multi_inputs();
  none[0].erase("data");
  EXPECT_HAS(error_of({{"inputs", none}}, m), "has neither \"data\" nor parameters.binary_data_size");

  json not_array = multi_inputs();
  not_array[0]["data"] = 5;
  EXPECT_HAS(error_of({{"inputs", not_array}}, m), "\"data\" must be a JSON array");
}

TEST(KServeValidation, ElementTypes) {
  const auto m = multi();
  json str_in_float = multi_inputs();
  str_in_float[0]["data"] = {1, "2", 3};
  auto msg = error_of({{"inputs", str_in_float}}, m);
  EXPECT_HAS(msg, "input 'x'");
  EXPECT_HAS(msg, "element 1 is a string, expected a number");

  json num_in_bytes = multi_inputs();
  num_in_bytes[2]["data"] = {5};
  EXPECT_HAS(error_of({{"inputs", num_in_bytes}}, m), "element 0 is 5, expected a string");

  const auto b = single(DType::kBool);
  json bool_num = {{"inputs", {{{"name", "in"}, {"datatype", "BOOL"}, {"shape", {2}}, {"data", {true, 1}}}}}};
  EXPECT_HAS(error_of(bool_num, b), "element 1 is 1, expected true or false");

  json fraction = multi_inputs();
  fraction[1]["data"] = {7, 1.5};
  EXPECT_HAS(error_of({{"inputs", fraction}}, m), "element 1 is 1.5, expected an integer");

  // An integral number written as a float is accepted.
  json integral = multi_inputs();
  integral[1]["data"] = {7.0, -8.0};
  auto p = parse_infer_request(json{{"inputs", integral}}.dump(), std::nullopt, m);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->inputs[1].tensor.values<int64_t>()[1], -8);
}

TEST(KServeValidation, IntegerRanges) {
  auto request = [](DType t, json data) {
    return json{{"inputs",
                 {{{"name", "in"},
                   {"datatype", std::string(datatype_name(t))},
                   {"shape", {data.size()}},
                   {"data", data}}}}};
  };
  EXPECT_HAS(error_of(request(DType::kInt8, {1, 128}), single(DType::kInt8)),
             "element 1 is 128, out of range [-128, 127]");
  EXPECT_HAS(error_of(request(DType::kInt8, {-129}), single(DType::kInt8)), "out of range [-128, 127]");
  EXPECT_HAS(error_of(request(DType::kUInt8, {-1}), single(DType::kUInt8)),
             "element 0 is -1, out of range [0, 255]");
  EXPECT_HAS(error_of(request(DType::kUInt16, {65536}), single(DType::kUInt16)), "out of range [0, 65535]");
  EXPECT_HAS(error_of(request(DType::kInt32, {2147483648LL}), single(DType::kInt32)), "out of range");
  EXPECT_HAS(error_of(request(DType::kUInt32, {-5}), single(DType::kUInt32)), "out of range");
  EXPECT_HAS(error_of(request(DType::kInt64, {9223372036854775808ULL}), single(DType::kInt64)),
             "out of range");
  EXPECT_HAS(error_of(request(DType::kUInt64, {-1}), single(DType::kUInt64)), "out of range");
  EXPECT_HAS(error_of(request(DType::kInt64, {1e19}), single(DType::kInt64)), "out of range");
  EXPECT_HAS(error_of(request(DType::kUInt64, {1.8446744073709552e19}), single(DType::kUInt64)),
             "out of range");
}

TEST(KServeValidation, FloatRanges) {
  auto request = [](DType t, json data) {
    return json{{"inputs",
                 {{{"name", "in"},
                   {"datatype", std::string(datatype_name(t))},
                   {"shape", {data.size()}},
                   {"data", data}}}}};
  };
  auto msg = error_of(request(DType::kFloat16, {1, 65520}), single(DType::kFloat16));
  EXPECT_HAS(msg, "element 1 is 65520");
  EXPECT_HAS(msg, "out of range for FP16");
  EXPECT_HAS(error_of(request(DType::kBFloat16, {-1e39}), single(DType::kBFloat16)), "out of range for BF16");
  EXPECT_HAS(error_of(request(DType::kFloat32, {1e39}), single(DType::kFloat32)), "out of range for FP32");
  EXPECT_TRUE(parse_infer_request(request(DType::kFloat32, {3.4028235e38}).dump(), std::nullopt,
                                  single(DType::kFloat32))
                  .ok());
}

TEST(KServeValidation, RequestFields) {
  const auto m = multi();
  EXPECT_HAS(error_of({{"inputs", multi_inputs()}, {"id", 5}}, m), "\"id\" must be a string");
  EXPECT_HAS(error_of({{"inputs", multi_inputs()}, {"parameters", {{"binary_data_output", "yes"}}}}, m),
             "binary_data_output must be true or false");
  EXPECT_HAS(error_of({{"inputs", multi_inputs()}, {"parameters", 3}}, m),
             "\"parameters\" must be an object");

  auto r = parse_infer_request("{\"inputs\": [", std::nullopt, m);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_HAS(r.status().message(), "not valid JSON");
  r = parse_infer_request("", std::nullopt, m);
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.status().message(), "not valid JSON");
}

TEST(KServeValidation, RequestedOutputs) {
  const auto m = multi();
  auto msg = error_of({{"inputs", multi_inputs()}, {"outputs", {{{"name", "nope"}}}}}, m);
  EXPECT_HAS(msg, "requested output 'nope' is not an output of model 'multi'");
  EXPECT_HAS(msg, "'y', 'z', 'w'");
  EXPECT_HAS(error_of({{"inputs", multi_inputs()}, {"outputs", {{{"name", "y"}}, {{"name", "y"}}}}}, m),
             "output 'y' is requested twice");
  EXPECT_HAS(error_of({{"inputs", multi_inputs()},
                       {"outputs", {{{"name", "y"}, {"parameters", {{"binary_data", 1}}}}}}},
                      m),
             "binary_data must be true or false");
  EXPECT_HAS(error_of({{"inputs", multi_inputs()}, {"outputs", {{{"id", "y"}}}}}, m),
             "needs a string \"name\"");
}

// ---- numeric "data" pre-scan -------------------------------------------------------------------------

TEST(KServeJsonFastPath, PrettyPrintedNestedAndMixedNumbersParseAsNlohmannWould) {
  backend::ModelMetadata m = single(DType::kFloat64);
  m.inputs[0].shape = Shape{Shape::kDynamic, 2};
  // Integers, negative integers, floats, exponents, -0, an integer too large for uint64 (becomes a double).
  json r = json::parse(R"({"inputs": [ { "name": "in", "datatype": "FP64", "shape": [3, 2],
      "data": [ [ 1 , -2 ], [0.5,-0.0] ,
                [ 1e-3, 18446744073709551616 ] ] } ]})");
  const std::string pretty = r.dump(2);
  auto p = parse_infer_request(pretty, std::nullopt, m);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  auto v = p->inputs[0].tensor.values<double>();
  EXPECT_EQ(std::vector<double>(v.begin(), v.end()),
            (std::vector<double>{1, -2, 0.5, -0.0, 1e-3, 18446744073709551616.0}));
  EXPECT_TRUE(std::signbit(v[3]));
}

TEST(KServeJsonFastPath, IntegerTypingMatchesNlohmann) {
  const auto m = single(DType::kUInt64);
  auto run = [&](const std::string& data) {
    return parse_infer_request(
        R"({"inputs":[{"name":"in","datatype":"UINT64","shape":[1],"data":)" + data + "}]}", std::nullopt, m);
  };
  auto ok = run("[18446744073709551615]");
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(ok->inputs[0].tensor.values<uint64_t>()[0], std::numeric_limits<uint64_t>::max());
  auto over = run("[18446744073709551616]");  // 2^64: a double, out of range
  ASSERT_FALSE(over.ok());
  EXPECT_HAS(over.status().message(), "out of range [0, 18446744073709551615]");
  auto frac = run("[2.5]");
  ASSERT_FALSE(frac.ok());
  EXPECT_HAS(frac.status().message(), "element 0 is 2.5, expected an integer");
  auto integral = run("[3e2]");
  ASSERT_TRUE(integral.ok()) << integral.status().to_string();
  EXPECT_EQ(integral->inputs[0].tensor.values<uint64_t>()[0], 300u);
}

TEST(KServeJsonFastPath, InvalidNumbersStillFailAsInvalidJson) {
  const auto m = single(DType::kFloat32);
  for (const char* data :
       {"[01]", "[1,,2]", "[1,]", "[.5]", "[1.]", "[1e]", "[+1]", "[1e400]", "[-]", "[[1]"}) {
    auto r = parse_infer_request(
        std::string(R"({"inputs":[{"name":"in","datatype":"FP32","shape":[1],"data":)") + data + "}]}",
        std::nullopt, m);
    ASSERT_FALSE(r.ok()) << data;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << data;
    EXPECT_HAS(r.status().message(), "not valid JSON");
  }
}

TEST(KServeJsonFastPath, OnlyInputDataIsRewritten) {
  // "data" arrays elsewhere (request parameters, nested objects, strings) come through untouched.
  json r = {{"inputs", multi_inputs()},
            {"parameters", {{"data", {1, 2}}, {"nested", {{"data", {3}}}}, {"text", "\"data\": [4]"}}}};
  auto p = parse_infer_request(r.dump(), std::nullopt, multi());
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->parameters, r["parameters"]);
  auto x = p->inputs[0].tensor.values<float>();
  EXPECT_EQ(std::vector<float>(x.begin(), x.end()), (std::vector<float>{1, 2, 3}));

  // A client's own null is not data, whatever was pre-scanned elsewhere; with duplicate keys the last
  // wins, as nlohmann has it.
  json null_data = multi_inputs();
  null_data[0]["data"] = nullptr;
  EXPECT_HAS(error_of({{"inputs", null_data}}, multi()), "\"data\" must be a JSON array, got null");
  std::string dup = json{{"inputs", multi_inputs()}}.dump();
  const std::string x_data = "\"data\":[1,2,3]";
  ASSERT_NE(dup.find(x_data), std::string::npos) << dup;
  std::string last_null = dup;
  last_null.replace(last_null.find(x_data), x_data.size(), x_data + ",\"data\":null");
  auto dn = parse_infer_request(last_null, std::nullopt, multi());
  ASSERT_FALSE(dn.ok());
  EXPECT_HAS(dn.status().message(), "\"data\" must be a JSON array, got null");
  std::string last_array = dup;
  last_array.replace(last_array.find(x_data), x_data.size(), "\"data\":null," + x_data);
  auto da = parse_infer_request(last_array, std::nullopt, multi());
  ASSERT_TRUE(da.ok()) << da.status().to_string();
  EXPECT_EQ(da->inputs[0].tensor.values<float>()[2], 3.0f);

  // Errors in the rewritten request report the client's text.
  std::string bad = json{{"inputs", multi_inputs()}}.dump();
  bad.back() = ',';
  auto e = parse_infer_request(bad, std::nullopt, multi());
  ASSERT_FALSE(e.ok());
  EXPECT_HAS(e.status().message(), "not valid JSON");
  EXPECT_EQ(e.status().message(), parse_json(bad, "inference request").status().message());
}

TEST(KServeJson, DeepJsonIsRefusedBeforeParsing) {
  const auto nested = [](size_t depth, const std::string& leaf) {
    return std::string(depth, '[') + leaf + std::string(depth, ']');
  };
  const auto m = single(DType::kInt64);
  const std::string input = R"({"name":"in","datatype":"INT64","shape":[1],"data":[7]})";
  // 100,000 levels in "parameters" used to crash the server when the parameters were copied.
  const std::string bomb = R"({"parameters":{"p":)" + nested(100000, "") + R"(},"inputs":[)" + input + "]}";
  for (auto length : {std::optional<size_t>(), std::optional<size_t>(bomb.size())}) {
    auto r = parse_infer_request(bomb, length, m);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_HAS(r.status().message(), "inference request: JSON nests deeper than 64 levels");
  }
  // Numeric "data" counts too, although the fast path takes it out of the text nlohmann parses:
  // the request, "inputs" and the input are 3 levels, so 61 more are the most.
  const auto data_request = [&](size_t depth) {
    return R"({"inputs":[{"name":"in","datatype":"INT64","shape":[1],"data":)" + nested(depth, "7") + "}]}";
  };
  auto too_deep = parse_infer_request(data_request(kMaxJsonDepth - 2), std::nullopt, m);
  ASSERT_FALSE(too_deep.ok());
  EXPECT_HAS(too_deep.status().message(), "JSON nests deeper than 64 levels");
  auto at_limit = parse_infer_request(data_request(kMaxJsonDepth - 3), std::nullopt, m);
  ASSERT_FALSE(at_limit.ok());  // parsed, then refused for what it is
  EXPECT_HAS(at_limit.status().message(), "nested deeper than the shape's rank");
}

TEST(KServeJsonFastPath, DepthAndCountChecksApply) {
  const auto m = multi();
  json deep = multi_inputs();
  deep[0]["data"] = json::parse("[[[1, 2, 3]]]");  // x has rank 2
  EXPECT_HAS(error_of({{"inputs", deep}}, m), "nested deeper than the shape's rank");
  json numbers_for_bytes = multi_inputs();
  numbers_for_bytes[2]["data"] = {5};
  EXPECT_HAS(error_of({{"inputs", numbers_for_bytes}}, m), "element 0 is 5, expected a string");
  json empty = multi_inputs();
  empty[1]["shape"] = {0};
  empty[1]["data"] = json::array();
  auto p = parse_infer_request(json{{"inputs", empty}}.dump(), std::nullopt, m);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->inputs[1].tensor.element_count(), 0);
}

// One input's "data" four ways: converted while scanned, with "datatype" before or after it; checked while
// scanned and converted once the datatype is known (written with an escape, which the pre-scan does not
// read); and through nlohmann's DOM (the "data" key written with an escape, which the pre-scan does not
// take). All must agree: the same bytes, or the same error.
TEST(KServeJsonFastPath, EveryKeyOrderAgreesWithTheDom) {
  const std::vector<std::string> datas = {"[1,2,3]",
                                          "[-1,0,1]",
                                          "[1.5,-2.25,3]",
                                          "[[1],[2],[3]]",
                                          "[[[1]],[[2]],[[3]]]",
                                          "[1,2]",
                                          "[1,2,3,4]",
                                          "[true,false,true]",
                                          "[1,true,3]",
                                          "[1,null,3]",
                                          "[300,1,1]",
                                          "[1,-129,1]",
                                          "[65520,1,1]",
                                          "[1e39,1,1]",
                                          "[-1e39,1,1]",
                                          "[2.5e0,3e2,1]",
                                          "[18446744073709551615,1,1]",
                                          "[18446744073709551616,1,1]",
                                          "[-9223372036854775808,1,1]",
                                          "[1e-400,1,1]",
                                          "[[1,2],3]",
                                          "[]"};
  for (const auto& [dtype_name, dtype] :
       std::vector<std::pair<std::string, DType>>{{"FP32", DType::kFloat32},
                                                  {"FP64", DType::kFloat64},
                                                  {"FP16", DType::kFloat16},
                                                  {"BF16", DType::kBFloat16},
                                                  {"INT8", DType::kInt8},
                                                  {"INT16", DType::kInt16},
                                                  {"INT32", DType::kInt32},
                                                  {"INT64", DType::kInt64},
                                                  {"UINT8", DType::kUInt8},
                                                  {"UINT16", DType::kUInt16},
                                                  {"UINT32", DType::kUInt32},
                                                  {"UINT64", DType::kUInt64},
                                                  {"BOOL", DType::kBool},
                                                  {"BYTES", DType::kString}}) {
    const auto m = single(dtype);
    for (const std::string& data : datas) {
      const std::string dt = "\"datatype\":\"" + dtype_name + "\"";
      const std::string shape = data == "[]" ? "\"shape\":[0]" : "\"shape\":[3]";
      auto body = [&](const std::string& fields) { return "{\"inputs\":[{" + fields + "}]}"; };
      const std::string first = body("\"name\":\"in\"," + shape + "," + dt + ",\"data\":" + data);
      const std::string last = body("\"data\":" + data + "," + dt + ",\"name\":\"in\"," + shape);
      const std::string dom = body("\"name\":\"in\"," + dt + "," + shape + ",\"\\u0064ata\":" + data);
      // An escaped datatype is not read before the DOM: the data is checked first, converted later.
      char first_letter[8];
      std::snprintf(first_letter, sizeof first_letter, "\\u%04X", dtype_name[0]);
      const std::string escaped = body("\"name\":\"in\",\"datatype\":\"" + std::string(first_letter) +
                                       dtype_name.substr(1) + "\"," + shape + ",\"data\":" + data);
      auto want = parse_infer_request(dom, std::nullopt, m);
      for (const std::string& text : {first, last, escaped}) {
        auto got = parse_infer_request(text, std::nullopt, m);
        ASSERT_EQ(got.ok(), want.ok()) << text << "\n"
                                       << got.status().to_string() << "\n"
                                       << want.status().to_string();
        if (!want.ok()) {
          EXPECT_EQ(got.status().to_string(), want.status().to_string()) << text;
          continue;
        }
        const Tensor& g = got->inputs[0].tensor;
        const Tensor& w = want->inputs[0].tensor;
        ASSERT_EQ(g.shape(), w.shape()) << text;
        if (dtype == DType::kString) {
          EXPECT_EQ(g.strings(), w.strings()) << text;
        } else {
          ASSERT_EQ(g.byte_size(), w.byte_size()) << text;
          EXPECT_EQ(std::memcmp(g.data(), w.data(), g.byte_size()), 0) << text;
        }
      }
    }
  }
}

TEST(KServeJsonFastPath, DuplicateDatatypeOrShapeAfterTheDataWins) {
  // Converted as INT8 while scanned (300 does not fit), but the last "datatype" says FP32.
  auto p = parse_infer_request(
      R"({"inputs":[{"name":"in","datatype":"INT8","shape":[2],"data":[1,300],"datatype":"FP32"}]})",
      std::nullopt, single(DType::kFloat32));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  auto v = p->inputs[0].tensor.values<float>();
  EXPECT_EQ(std::vector<float>(v.begin(), v.end()), (std::vector<float>{1, 300}));
  // The buffer was sized for the first "shape"; the data and the last "shape" are larger.
  p = parse_infer_request(
      R"({"inputs":[{"name":"in","datatype":"INT32","shape":[1],"data":[4,5,6],"shape":[3]}]})", std::nullopt,
      single(DType::kInt32));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  auto i = p->inputs[0].tensor.values<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(i.begin(), i.end()), (std::vector<int32_t>{4, 5, 6}));
}

TEST(KServeJsonFastPath, LargeDataWithTheShapeAfterItOrLongerThanIt) {
  constexpr int kCount = 200000;
  std::string data = "[";
  for (int k = 0; k < kCount; ++k) data += (k ? "," : "") + std::to_string(k % 1000 - 500);
  data += "]";
  for (const std::string dt : {"INT16", "FP64"}) {
    const DType dtype = dt == "INT16" ? DType::kInt16 : DType::kFloat64;
    // "shape" after "data": every value lands where it belongs.
    auto p = parse_infer_request(R"({"inputs":[{"name":"in","datatype":")" + dt + R"(","data":)" + data +
                                     R"(,"shape":[)" + std::to_string(kCount) + "]}]}",
                                 std::nullopt, single(dtype));
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    const Tensor& t = p->inputs[0].tensor;
    ASSERT_EQ(t.element_count(), kCount);
    for (int k = 0; k < kCount; k += 997) {
      const double got = dtype == DType::kInt16 ? t.values<int16_t>()[k] : t.values<double>()[k];
      ASSERT_EQ(got, k % 1000 - 500) << dt << " element " << k;
    }
    // Far more data than the shape says: the buffer sized for the shape grows, and the count is refused.
    auto longer = parse_infer_request(
        R"({"inputs":[{"name":"in","shape":[10],"datatype":")" + dt + R"(","data":)" + data + "}]}",
        std::nullopt, single(dtype));
    ASSERT_FALSE(longer.ok());
    EXPECT_HAS(longer.status().message(), "\"data\" has 200000 elements but shape [10] needs 10");
  }
}

// ---- binary framing -----------------------------------------------------------------------------------

// {x: FP32 [2,3] binary, ids: INT64 [2] JSON, text: BYTES [2] binary, h: FP16 [2] binary} and its body.
struct BinaryRequest {
  std::string header;
  std::string body;
};
BinaryRequest binary_request(uint64_t x_size = 24, uint64_t text_size = 14, uint64_t h_size = 4) {
  json r = {
      {"id", "req-7"},
      {"inputs",
       {{{"name", "x"},
         {"datatype", "FP32"},
         {"shape", {2, 3}},
         {"parameters", {{"binary_data_size", x_size}}}},
        {{"name", "ids"}, {"datatype", "INT64"}, {"shape", {2}}, {"data", {7, 8}}},
        {{"name", "h"}, {"datatype", "FP16"}, {"shape", {2}}, {"parameters", {{"binary_data_size", h_size}}}},
        {{"name", "text"},
         {"datatype", "BYTES"},
         {"shape", {2}},
         {"parameters", {{"binary_data_size", text_size}}}}}}};
  BinaryRequest b;
  b.header = r.dump();
  // Binary parts in request order: x, h, text.
  b.body = b.header + raw_bytes(std::vector<float>{1, 2, 3, 4, 5, 6}) +
           raw_bytes(std::vector<uint16_t>{0x3C00, 0x4000}) + length_prefixed({"ab", "cdef"});
  return b;
}

TEST(KServeBinary, FollowsRequestOrder) {
  auto b = binary_request();
  auto p = parse_infer_request(b.body, b.header.size(), multi());
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->id, "req-7");
  auto x = p->inputs[0].tensor.values<float>();
  EXPECT_EQ(std::vector<float>(x.begin(), x.end()), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(p->inputs[2].tensor.strings(), (std::vector<std::string>{"ab", "cdef"}));
  EXPECT_EQ(p->inputs[3].tensor.values<uint16_t>()[1], 0x4000);
}

TEST(KServeBinary, TruncatedPayloadNamesTensorAndByteCounts) {
  auto b = binary_request();
  b.body.resize(b.body.size() - 5);  // cut into text's bytes
  auto p = parse_infer_request(b.body, b.header.size(), multi());
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_HAS(p.status().message(), "input 'text'");
  EXPECT_HAS(p.status().message(), "binary_data_size is 14 bytes but only 9 bytes of binary data remain");

  // Cut into the first binary tensor.
  b = binary_request();
  b.body.resize(b.header.size() + 10);
  p = parse_infer_request(b.body, b.header.size(), multi());
  ASSERT_FALSE(p.ok());
  EXPECT_HAS(p.status().message(), "input 'x': binary_data_size is 24 bytes but only 10");
}

TEST(KServeBinary, ExtraBytesAndSizeMismatches) {
  auto b = binary_request();
  b.body += "xx";
  auto p = parse_infer_request(b.body, b.header.size(), multi());
  ASSERT_FALSE(p.ok());
  EXPECT_HAS(p.status().message(), "44 bytes follow the");
  EXPECT_HAS(p.status().message(), "binary_data_size add up to 42");

  // x says 20 bytes, text 18: the sum still matches the body but x's shape needs 24.
  b = binary_request(20, 18);
  p = parse_infer_request(b.body, b.header.size(), multi());
  ASSERT_FALSE(p.ok());
  EXPECT_HAS(p.status().message(), "input 'x'");
  EXPECT_HAS(p.status().message(), "FP32 shape [2,3] needs 24 bytes but binary_data_size is 20");

  // h says 6 bytes (text 12): the sum matches but h's shape needs 4.
  b = binary_request(24, 12, 6);
  p = parse_infer_request(b.body, b.header.size(), multi());
  ASSERT_FALSE(p.ok());
  EXPECT_HAS(p.status().message(), "input 'h'");
  EXPECT_HAS(p.status().message(), "needs 4 bytes but binary_data_size is 6");
}

TEST(KServeBinary, BytesFramingErrors) {
  const auto m = single(DType::kString);
  auto run = [&](const std::string& bytes, int count) {
    json r = {{"inputs",
               {{{"name", "in"},
                 {"datatype", "BYTES"},
                 {"shape", {count}},
                 {"parameters", {{"binary_data_size", bytes.size()}}}}}}};
    const std::string header = r.dump();
    auto p = parse_infer_request(header + bytes, header.size(), m);
    EXPECT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    return p.status().message();
  };
  std::string long_len = length_prefixed({"abcdef"});
  long_len.resize(long_len.size() - 2);
  EXPECT_HAS(run(long_len, 1), "BYTES element 0 declares 6 bytes but only 4 remain");
  EXPECT_HAS(run(length_prefixed({"a"}) + "\x01\x00", 2), "BYTES element 1 has a truncated length prefix");
  EXPECT_HAS(run(length_prefixed({"a", "b"}), 3), "holds 2 BYTES elements, the shape needs 3");
  EXPECT_HAS(run(length_prefixed({"a", "b"}), 1), "more than the shape's 1 BYTES elements");
}

TEST(KServeBinary, BoolBytesMustBeZeroOrOne) {
  const auto m = single(DType::kBool);
  json r = {
      {"inputs",
       {{{"name", "in"}, {"datatype", "BOOL"}, {"shape", {2}}, {"parameters", {{"binary_data_size", 2}}}}}}};
  const std::string header = r.dump();
  auto p = parse_infer_request(header + std::string("\x01\x02", 2), header.size(), m);
  ASSERT_FALSE(p.ok());
  EXPECT_HAS(p.status().message(), "BOOL element 1 is byte 2, expected 0 or 1");
}

TEST(KServeBinary, HeaderLengthErrors) {
  auto b = binary_request();
  auto p = parse_infer_request(b.body, b.body.size() + 1, multi());
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_HAS(p.status().message(), "Inference-Header-Content-Length is " + std::to_string(b.body.size() + 1) +
                                       " but the body has only " + std::to_string(b.body.size()));

  // Binary inputs without the header.
  p = parse_infer_request(b.header, std::nullopt, multi());
  ASSERT_FALSE(p.ok());
  EXPECT_HAS(p.status().message(), "input 'x'");
  EXPECT_HAS(p.status().message(), "no Inference-Header-Content-Length");

  // A header length that cuts the JSON.
  p = parse_infer_request(b.body, b.header.size() - 1, multi());
  ASSERT_FALSE(p.ok());
  EXPECT_HAS(p.status().message(), "not valid JSON");

  // Both data and binary_data_size.
  json both = multi_inputs();
  both[0]["parameters"] = {{"binary_data_size", 12}};
  const std::string header = json{{"inputs", both}}.dump();
  p = parse_infer_request(header + std::string(12, '\0'), header.size(), multi());
  ASSERT_FALSE(p.ok());
  EXPECT_HAS(p.status().message(), "gives both \"data\" and parameters.binary_data_size");

  json negative = multi_inputs();
  negative[0].erase("data");
  negative[0]["parameters"] = {{"binary_data_size", -12}};
  const std::string negative_header = json{{"inputs", negative}}.dump();
  p = parse_infer_request(negative_header, negative_header.size(), multi());
  ASSERT_FALSE(p.ok());
  EXPECT_HAS(p.status().message(), "binary_data_size must be a non-negative integer");
}

TEST(KServeBinary, AlignedNumericInputsAreViewsIntoTheBody) {
  const auto m = single(DType::kFloat32);
  const std::vector<float> values = {1, 2, 3, 4};
  json r = {
      {"inputs",
       {{{"name", "in"}, {"datatype", "FP32"}, {"shape", {4}}, {"parameters", {{"binary_data_size", 16}}}}}}};
  std::string header = r.dump();
  // Pad the JSON with spaces to a multiple of 16 so the binary part is aligned in a malloc'ed string.
  header.append((16 - header.size() % 16) % 16, ' ');
  auto body = std::make_shared<const std::string>(header + raw_bytes(values));
  ASSERT_EQ(reinterpret_cast<uintptr_t>(body->data()) % 16, 0u);
  auto p = parse_infer_request(*body, header.size(), m, body);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->inputs[0].tensor.data(), body->data() + header.size());
  // The tensor shares the body's ownership: the bytes outlive the caller's reference.
  EXPECT_EQ(body.use_count(), 2);
  const void* const at = body->data() + header.size();
  body.reset();
  EXPECT_EQ(p->inputs[0].tensor.data(), at);
  auto kept = p->inputs[0].tensor.values<float>();
  EXPECT_EQ(std::vector<float>(kept.begin(), kept.end()), values);

  // Without an owner of the body: copied.
  const std::string plain = header + raw_bytes(values);
  p = parse_infer_request(plain, header.size(), m);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_NE(p->inputs[0].tensor.data(), plain.data() + header.size());

  // Misaligned: copied, same values.
  header += ' ';
  auto odd = std::make_shared<const std::string>(header + raw_bytes(values));
  p = parse_infer_request(*odd, header.size(), m, odd);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_NE(p->inputs[0].tensor.data(), odd->data() + header.size());
  EXPECT_EQ(odd.use_count(), 1);
  auto v = p->inputs[0].tensor.values<float>();
  EXPECT_EQ(std::vector<float>(v.begin(), v.end()), values);
}

// ---- responses ----------------------------------------------------------------------------------------

std::vector<NamedTensor> multi_outputs() {
  return {{"y", *Tensor::from_values(DType::kFloat32, Shape{1, 3}, std::vector<float>{0.5f, -1.25f, 3})},
          {"z", *Tensor::from_values(DType::kInt64, Shape{2}, std::vector<int64_t>{-4, 9})},
          {"w", *Tensor::from_strings(Shape{1}, {"ok"})}};
}

TEST(KServeResponse, AllOutputsInModelOrderWithIdEcho) {
  json r = {{"id", "abc"}, {"inputs", multi_inputs()}, {"parameters", {{"custom", 1}}}};
  auto p = parse_infer_request(r.dump(), std::nullopt, multi());
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->parameters, (json{{"custom", 1}}));
  auto outs = multi_outputs();
  auto e = encode_infer_response("multi", "", *p, outs);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  json j = json::parse(e->body);
  EXPECT_EQ(j["model_name"], "multi");
  EXPECT_FALSE(j.contains("model_version"));
  EXPECT_EQ(j["id"], "abc");
  ASSERT_EQ(j["outputs"].size(), 3u);
  EXPECT_EQ(j["outputs"][0],
            (json{{"name", "y"}, {"datatype", "FP32"}, {"shape", {1, 3}}, {"data", {0.5, -1.25, 3.0}}}));
  EXPECT_EQ(j["outputs"][1]["name"], "z");
  EXPECT_EQ(j["outputs"][1]["data"], json::array({-4, 9}));
  EXPECT_EQ(j["outputs"][2]["data"], json::array({"ok"}));

  // No id: no "id" key.
  InferRequest anonymous;
  e = encode_infer_response("multi", "", anonymous, outs);
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(json::parse(e->body).contains("id"));
}

TEST(KServeResponse, RequestedSubsetOrderAndBinary) {
  json r = {{"inputs", multi_inputs()},
            {"outputs", {{{"name", "z"}, {"parameters", {{"binary_data", true}}}}, {{"name", "y"}}}}};
  auto p = parse_infer_request(r.dump(), std::nullopt, multi());
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_EQ(p->outputs.size(), 2u);
  EXPECT_EQ(p->outputs[0].name, "z");
  EXPECT_TRUE(p->outputs[0].binary);
  EXPECT_FALSE(p->outputs[1].binary);
  auto e = encode_infer_response("multi", "2", *p, multi_outputs());
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  ASSERT_TRUE(e->json_length.has_value());
  json j = response_json(*e);
  EXPECT_EQ(j["model_version"], "2");
  ASSERT_EQ(j["outputs"].size(), 2u);
  EXPECT_EQ(
      j["outputs"][0],
      (json{
          {"name", "z"}, {"datatype", "INT64"}, {"shape", {2}}, {"parameters", {{"binary_data_size", 16}}}}));
  EXPECT_EQ(j["outputs"][1]["name"], "y");
  EXPECT_EQ(j["outputs"][1]["data"], json::array({0.5, -1.25, 3.0}));
  EXPECT_EQ(e->body.substr(*e->json_length), raw_bytes(std::vector<int64_t>{-4, 9}));

  // binary_data_output makes every output binary unless one says otherwise.
  json all = {{"inputs", multi_inputs()},
              {"parameters", {{"binary_data_output", true}}},
              {"outputs", {{{"name", "y"}, {"parameters", {{"binary_data", false}}}}, {{"name", "w"}}}}};
  p = parse_infer_request(all.dump(), std::nullopt, multi());
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_FALSE(p->outputs[0].binary);
  EXPECT_TRUE(p->outputs[1].binary);
  e = encode_infer_response("multi", "", *p, multi_outputs());
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->body.substr(*e->json_length), length_prefixed({"ok"}));
}

TEST(KServeResponse, MissingOrDeviceOutputIsInternal) {
  InferRequest r;
  r.outputs = {{"y", false}};
  std::vector<NamedTensor> none;
  auto e = encode_infer_response("m", "", r, none);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInternal);
  EXPECT_HAS(e.status().message(), "no output named 'y'");

  auto storage = std::make_shared<std::vector<float>>(std::vector<float>{1, 2});
  auto dev = Tensor::adopt(DType::kFloat32, Shape{2}, storage->data(), 8, storage, MemoryClass::kDevice, 0);
  ASSERT_TRUE(dev.ok());
  std::vector<NamedTensor> outs = {{"y", *dev}};
  e = encode_infer_response("m", "", r, outs);
  ASSERT_FALSE(e.ok());
  EXPECT_HAS(e.status().message(), "device memory");
}

TEST(KServeResponse, NonFiniteFloatsUseTritonTokens) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<NamedTensor> outs = {
      {"y",
       *Tensor::from_values(DType::kFloat32, Shape{4}, std::vector<float>{std::nanf(""), inf, -inf, 1})}};
  auto e = encode_infer_response("m", "", InferRequest{}, outs);
  ASSERT_TRUE(e.ok());
  EXPECT_HAS(e->body, "\"data\":[NaN,Infinity,-Infinity,1.0]");
}

TEST(KServeResponse, FloatTextIsShortestAndRoundTrips) {
  std::vector<float> f = {0.1f, 1e-45f, 3.4028235e38f, -0.0f, 123456.79f, 1.0f / 3.0f};
  std::vector<double> d = {0.1, 5e-324, 1.7976931348623157e308, 1.0 / 3.0};
  std::vector<NamedTensor> outs = {{"f", *Tensor::from_values(DType::kFloat32, Shape{6}, f)},
                                   {"d", *Tensor::from_values(DType::kFloat64, Shape{4}, d)}};
  auto e = encode_infer_response("m", "", InferRequest{}, outs);
  ASSERT_TRUE(e.ok());
  EXPECT_HAS(e->body, "\"data\":[0.1,1e-45,3.4028235e+38,-0.0,123456.79,0.33333334]");
  json j = json::parse(e->body);
  for (size_t i = 0; i < f.size(); ++i)
    EXPECT_EQ(static_cast<float>(j["outputs"][0]["data"][i].get<double>()), f[i]);
  for (size_t i = 0; i < d.size(); ++i) EXPECT_EQ(j["outputs"][1]["data"][i].get<double>(), d[i]);
}

// ---- metadata and errors ------------------------------------------------------------------------------

TEST(KServeMetadata, ShapeOfTheObject) {
  const std::vector<std::string> versions = {"1", "3"};
  json j = model_metadata("multi", versions, multi());
  EXPECT_EQ(j["name"], "multi");
  EXPECT_EQ(j["versions"], json::array({"1", "3"}));
  EXPECT_EQ(j["platform"], "onnx_onnxv1");
  ASSERT_EQ(j["inputs"].size(), 4u);
  EXPECT_EQ(j["inputs"][0], (json{{"name", "x"}, {"datatype", "FP32"}, {"shape", {-1, 3}}}));
  EXPECT_EQ(j["inputs"][2], (json{{"name", "text"}, {"datatype", "BYTES"}, {"shape", {-1}}}));
  EXPECT_EQ(j["inputs"][3], (json{{"name", "h"}, {"datatype", "FP16"}, {"shape", {2}}}));
  ASSERT_EQ(j["outputs"].size(), 3u);
  EXPECT_EQ(j["outputs"][1], (json{{"name", "z"}, {"datatype", "INT64"}, {"shape", {-1}}}));

  backend::ModelMetadata llama = multi();
  llama.backend = "llama.cpp";
  llama.platform = "llama.cpp_gguf";  // the backend names its platform; the codec only reports it
  EXPECT_EQ(model_metadata("l", {}, llama)["platform"], "llama.cpp_gguf");
  EXPECT_EQ(model_metadata("l", {}, llama)["versions"], json::array());
}

TEST(KServeError, BodyIsAnErrorObjectEvenForBadUtf8) {
  EXPECT_EQ(json::parse(error_body("input 'x' is missing")), (json{{"error", "input 'x' is missing"}}));
  json j = json::parse(error_body("bad \xff byte"));
  EXPECT_HAS(j["error"].get<std::string>(), "bad ");
}

}  // namespace
}  // namespace gantry::protocol::kserve
