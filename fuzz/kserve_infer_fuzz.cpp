// Fuzzes the KServe v2 request parser: any body and Inference-Header-Content-Length must give a request
// or an InvalidArgument with a message, never a crash or an out-of-bounds read. An accepted request is
// echoed back (inputs as outputs) through the encoder, whose framing must be consistent.
//
// Input layout: byte 0 picks the header mode (none / a length within the body / any length), bytes 1-2
// are that length (little-endian), the rest is the body.
//
// Run with -entropic=0: this target links the whole server (runtime, both backends), and libFuzzer's
// entropic scheduler then spends ~90% of its time in UpdateFeatureFrequency (28 vs ~450 exec/s here).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <vector>

#include "gantry/protocol/kserve_codec.h"
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
                 tensor_info("text", DType::kString, Shape{Shape::kDynamic}),
                 tensor_info("h", DType::kFloat16, Shape{2})};
    md.outputs = {tensor_info("x", DType::kFloat32, Shape{Shape::kDynamic, 2}),
                  tensor_info("ids", DType::kInt64, Shape{Shape::kDynamic}),
                  tensor_info("text", DType::kString, Shape{Shape::kDynamic}),
                  tensor_info("h", DType::kFloat16, Shape{2})};
    return md;
  }();
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace ks = gantry::protocol::kserve;
  if (size < 3) return 0;
  const uint8_t mode = data[0] % 3;
  const size_t length = static_cast<size_t>(data[1]) | static_cast<size_t>(data[2]) << 8;
  // A copy of exactly the body, so ASan sees any read past its end.
  const std::vector<char> bytes(data + 3, data + size);
  const std::string_view body(bytes.data(), bytes.size());
  std::optional<size_t> json_length;
  if (mode == 1) json_length = length % (body.size() + 1);
  if (mode == 2) json_length = length;

  auto request = ks::parse_infer_request(body, json_length, model());
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
  // Inputs and outputs share names and types, so the inputs serve as the model's outputs.
  auto response = ks::encode_infer_response("fuzz", "1", *request, request->inputs);
  if (!response.ok()) {
    // Only a BYTES output with non-UTF-8 bytes asked for as JSON may fail.
    if (response.status().code() != gantry::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  if (response->json_length && *response->json_length > response->body.size()) std::abort();
  const std::string_view header =
      std::string_view(response->body).substr(0, response->json_length.value_or(response->body.size()));
  auto parsed = nlohmann::json::parse(header, nullptr, /*allow_exceptions=*/false);
  // The header is JSON, except that non-finite floats are written as NaN/Infinity (Triton's choice).
  if (parsed.is_discarded() && header.find("NaN") == std::string_view::npos &&
      header.find("Infinity") == std::string_view::npos)
    std::abort();
  return 0;
}
