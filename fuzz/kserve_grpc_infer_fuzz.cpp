// Fuzzes the KServe v2 gRPC request conversion: any bytes that parse as a ModelInferRequest (protobuf
// decides that) must give validated tensors or an InvalidArgument with a message, never a crash or an
// out-of-bounds read. An accepted request is echoed back (inputs as outputs) through the encoder, whose
// message must be consistent (one raw entry per output, or typed contents of the right size) and must
// serialize and parse back.
//
// Run with -entropic=0 (it links the whole server; see kserve_infer_fuzz.cpp).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "gantry/protocol/kserve_grpc_codec.h"
#include "kserve_fuzz_common.h"

namespace {

using gantry::DType;
using gantry::Shape;
using gantry::server::fuzz::tensor_info;

const gantry::backend::ModelMetadata& model() {
  static const gantry::backend::ModelMetadata m = [] {
    gantry::backend::ModelMetadata md;
    md.name = "fuzz";
    md.backend = "onnxruntime";
    md.inputs = {tensor_info("x", DType::kFloat32, Shape{Shape::kDynamic, 2}),
                 tensor_info("ids", DType::kInt64, Shape{Shape::kDynamic}),
                 tensor_info("b", DType::kInt8, Shape{2}),
                 tensor_info("text", DType::kString, Shape{Shape::kDynamic}),
                 tensor_info("h", DType::kFloat16, Shape{2})};
    md.outputs = md.inputs;
    return md;
  }();
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace gc = gantry::protocol::kserve_grpc;
  inference::ModelInferRequest message;
  if (!message.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto request = gc::parse_infer_request(message, model());
  if (!request.ok()) {
    if (request.status().code() != gantry::StatusCode::kInvalidArgument || request.status().message().empty())
      std::abort();
    return 0;
  }
  if (request->inputs.size() != model().inputs.size()) std::abort();
  for (size_t i = 0; i < request->inputs.size(); ++i) {
    const auto& t = request->inputs[i].tensor;
    if (request->inputs[i].name != model().inputs[i].name || t.dtype() != model().inputs[i].dtype)
      std::abort();
    if (!model().inputs[i].shape.accepts(t.shape())) std::abort();
  }
  inference::ModelInferResponse response;
  if (!gc::encode_infer_response("fuzz", *request, request->inputs, response).ok()) std::abort();
  const bool raw = response.raw_output_contents_size() > 0;
  if (raw && response.raw_output_contents_size() != response.outputs_size()) std::abort();
  std::string bytes;
  if (!response.SerializeToString(&bytes)) std::abort();
  inference::ModelInferResponse back;
  if (!back.ParseFromString(bytes) || back.outputs_size() != response.outputs_size()) std::abort();
  return 0;
}
