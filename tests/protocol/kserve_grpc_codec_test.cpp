#include "gantry/protocol/kserve_grpc_codec.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace gantry::protocol::kserve_grpc {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;

backend::TensorInfo info(std::string name, DType dtype, Shape shape) {
  backend::TensorInfo i;
  i.name = std::move(name);
  i.dtype = dtype;
  i.shape = std::move(shape);
  i.dim_names.assign(i.shape.rank(), "");
  return i;
}

// x: FP32 [?,3]; n: INT8 [2]; s: BYTES [?]. Outputs y: FP32, h: FP16.
backend::ModelMetadata model() {
  backend::ModelMetadata m;
  m.name = "m";
  m.backend = "onnxruntime";
  m.inputs = {info("x", DType::kFloat32, Shape{Shape::kDynamic, 3}), info("n", DType::kInt8, Shape{2}),
              info("s", DType::kString, Shape{Shape::kDynamic})};
  m.outputs = {info("y", DType::kFloat32, Shape{Shape::kDynamic}), info("h", DType::kFloat16, Shape{1})};
  return m;
}

// A valid typed request for model(), inputs in a different order than the model's.
ModelInferRequest typed() {
  ModelInferRequest r;
  r.set_model_name("m");
  r.set_id("abc");
  auto* s = r.add_inputs();
  s->set_name("s");
  s->set_datatype("BYTES");
  s->add_shape(2);
  s->mutable_contents()->add_bytes_contents("hi");
  s->mutable_contents()->add_bytes_contents(std::string("\0\xff", 2));
  auto* x = r.add_inputs();
  x->set_name("x");
  x->set_datatype("FP32");
  x->add_shape(1);
  x->add_shape(3);
  for (float v : {1.5f, -2.f, 3.25f}) x->mutable_contents()->add_fp32_contents(v);
  auto* n = r.add_inputs();
  n->set_name("n");
  n->set_datatype("INT8");
  n->add_shape(2);
  n->mutable_contents()->add_int_contents(-128);
  n->mutable_contents()->add_int_contents(127);
  return r;
}

// The same request as raw_input_contents.
ModelInferRequest raw() {
  ModelInferRequest r = typed();
  for (auto& in : *r.mutable_inputs()) in.clear_contents();
  r.add_raw_input_contents(std::string("\x02\0\0\0hi\x02\0\0\0\0\xff", 12));
  float x[] = {1.5f, -2.f, 3.25f};
  r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(x), sizeof x));
  r.add_raw_input_contents(std::string("\x80\x7f", 2));
  return r;
}

#define EXPECT_FAILS_WITH(result, phrase)                                                      \
  do {                                                                                         \
    auto r_ = (result);                                                                        \
    ASSERT_FALSE(r_.ok());                                                                     \
    EXPECT_EQ(r_.status().code(), StatusCode::kInvalidArgument);                               \
    EXPECT_NE(r_.status().message().find(phrase), std::string::npos) << r_.status().message(); \
  } while (0)

TEST(GrpcCodec, TypedAndRawRequestsGiveTheSameTensorsInModelOrder) {
  for (const ModelInferRequest& req : {typed(), raw()}) {
    auto p = parse_infer_request(req, model());
    ASSERT_TRUE(p.ok()) << p.status().message();
    ASSERT_EQ(p->inputs.size(), 3u);
    EXPECT_EQ(p->id, "abc");
    EXPECT_EQ(p->binary_outputs, req.raw_input_contents_size() > 0);
    EXPECT_EQ(p->inputs[0].name, "x");
    EXPECT_EQ(p->inputs[0].tensor.shape(), (Shape{1, 3}));
    auto x = p->inputs[0].tensor.values<float>();
    EXPECT_EQ(std::vector<float>(x.begin(), x.end()), (std::vector<float>{1.5f, -2.f, 3.25f}));
    auto n = p->inputs[1].tensor.values<int8_t>();
    EXPECT_EQ(std::vector<int8_t>(n.begin(), n.end()), (std::vector<int8_t>{-128, 127}));
    EXPECT_EQ(p->inputs[2].tensor.strings(), (std::vector<std::string>{"hi", std::string("\0\xff", 2)}));
  }
}

// With an owner of the request, aligned raw bytes are not copied: the tensor points into the request and
// holds the owner; without one they are copied.
TEST(GrpcCodec, AlignedRawInputsPointIntoTheOwnedRequest) {
  auto req = std::make_shared<const ModelInferRequest>(raw());
  const std::string& x = req->raw_input_contents(1);
  ASSERT_EQ(reinterpret_cast<uintptr_t>(x.data()) % sizeof(float), 0u);
  auto p = parse_infer_request(*req, model(), req);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->inputs[0].tensor.data(), x.data());
  EXPECT_EQ(p->inputs[1].tensor.data(), req->raw_input_contents(2).data());
  EXPECT_EQ(req.use_count(), 3) << "x and the INT8 input hold the request; BYTES become strings";
  auto copied = parse_infer_request(*req, model());
  ASSERT_TRUE(copied.ok()) << copied.status().message();
  EXPECT_NE(copied->inputs[0].tensor.data(), x.data());
  EXPECT_EQ(req.use_count(), 3);
  p = std::move(copied);
  EXPECT_EQ(req.use_count(), 1);
}

TEST(GrpcCodec, RefusesWhatDoesNotFitTheModel) {
  auto m = model();
  {
    auto r = typed();
    r.mutable_inputs(1)->set_shape(1, 4);
    EXPECT_FAILS_WITH(parse_infer_request(r, m), "does not match the model's");
  }
  {
    auto r = typed();
    r.mutable_inputs(1)->set_datatype("FP64");
    EXPECT_FAILS_WITH(parse_infer_request(r, m), "datatype FP64 does not match the model's FP32");
  }
  {
    auto r = typed();
    r.mutable_inputs(1)->mutable_contents()->add_fp32_contents(9);
    EXPECT_FAILS_WITH(parse_infer_request(r, m), "fp32_contents has 4 elements but shape [1,3] needs 3");
  }
  {
    auto r = typed();
    r.mutable_inputs(1)->mutable_contents()->add_fp64_contents(9);
    EXPECT_FAILS_WITH(parse_infer_request(r, m), "contents.fp64_contents is set but datatype FP32");
  }
  {
    auto r = typed();
    r.mutable_inputs(2)->mutable_contents()->set_int_contents(1, 128);
    EXPECT_FAILS_WITH(parse_infer_request(r, m), "element 1 is 128, outside INT8's range");
  }
  {
    auto r = typed();
    r.mutable_inputs()->RemoveLast();
    EXPECT_FAILS_WITH(parse_infer_request(r, m), "input 'n' is missing");
  }
  {
    auto r = typed();
    *r.add_inputs() = r.inputs(1);
    EXPECT_FAILS_WITH(parse_infer_request(r, m), "input 'x' is given twice");
  }
  {
    auto r = typed();
    r.add_outputs()->set_name("zz");
    EXPECT_FAILS_WITH(parse_infer_request(r, m), "requested output 'zz' is not an output");
  }
  {
    auto r = raw();
    r.mutable_raw_input_contents()->RemoveLast();
    EXPECT_FAILS_WITH(parse_infer_request(r, m),
                      "raw_input_contents has 2 entries but the request has 3 inputs");
  }
  {
    auto r = raw();
    r.set_raw_input_contents(1, std::string(8, '\0'));
    EXPECT_FAILS_WITH(parse_infer_request(r, m), "needs 12 bytes but raw_input_contents[1]'s size is 8");
  }
  {
    auto r = raw();
    r.mutable_inputs(0)->mutable_contents()->add_bytes_contents("x");
    EXPECT_FAILS_WITH(parse_infer_request(r, m), "typed contents while the request uses raw_input_contents");
  }
}

TEST(GrpcCodec, Fp16HasNoTypedFieldSoTheResponseGoesRaw) {
  kserve::InferRequest req;
  req.id = "7";
  auto y = Tensor::from_values<float>(DType::kFloat32, Shape{2}, {0.5f, 2.f});
  ASSERT_TRUE(y.ok());
  std::vector<NamedTensor> out{{"y", std::move(*y)}};

  ModelInferResponse typed_response;
  ASSERT_TRUE(encode_infer_response("m", req, out, typed_response).ok());
  EXPECT_EQ(typed_response.id(), "7");
  EXPECT_EQ(typed_response.raw_output_contents_size(), 0);
  ASSERT_EQ(typed_response.outputs_size(), 1);
  EXPECT_EQ(typed_response.outputs(0).datatype(), "FP32");
  EXPECT_EQ(typed_response.outputs(0).contents().fp32_contents_size(), 2);
  EXPECT_EQ(typed_response.outputs(0).contents().fp32_contents(1), 2.f);

  auto h = Tensor::allocate(DType::kFloat16, Shape{1});
  ASSERT_TRUE(h.ok());
  std::memset(h->data(), 0x3c, 1);
  static_cast<uint8_t*>(h->data())[1] = 0x3c;
  out.push_back({"h", std::move(*h)});
  req.outputs = {{"h", false}, {"y", false}};  // requested order wins
  ModelInferResponse raw_response;
  ASSERT_TRUE(encode_infer_response("m", req, out, raw_response).ok());
  ASSERT_EQ(raw_response.raw_output_contents_size(), 2);
  EXPECT_EQ(raw_response.outputs(0).name(), "h");
  EXPECT_EQ(raw_response.outputs(0).datatype(), "FP16");
  EXPECT_EQ(raw_response.raw_output_contents(0), std::string("\x3c\x3c", 2));
  EXPECT_EQ(raw_response.raw_output_contents(1).size(), 8u);
  EXPECT_EQ(raw_response.outputs(1).contents().fp32_contents_size(), 0);
}

TEST(GrpcCodec, StatusCodesMapLikeHttp) {
  EXPECT_EQ(code_for(StatusCode::kInvalidArgument), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(code_for(StatusCode::kNotFound), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(code_for(StatusCode::kUnavailable), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(code_for(StatusCode::kResourceExhausted), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(code_for(StatusCode::kInternal), grpc::StatusCode::INTERNAL);
  auto s = to_grpc(NotFound("model 'x' is not served here"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "model 'x' is not served here");
  EXPECT_TRUE(to_grpc(Status::Ok()).ok());
  EXPECT_EQ(http_status_for_grpc(grpc::StatusCode::UNAUTHENTICATED), 401);
}

}  // namespace
}  // namespace gantry::protocol::kserve_grpc
