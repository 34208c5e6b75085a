// Differential fuzzing of the KServe v2 JSON "data" pre-scan: a request body must parse to the same
// tensors, or fail with the same error, as the same body with every "data" key written "\u0064ata"
// (the same JSON document, which the pre-scan does not recognise, so nlohmann's DOM reads every array).
// Both bodies are the same document, so only the positions in a "not valid JSON" message may differ.
//
// Input: the body (all JSON, no binary part). Run with -entropic=0 (see kserve_infer_fuzz.cpp).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

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
                 tensor_info("i", DType::kInt8, Shape{Shape::kDynamic}),
                 tensor_info("u", DType::kUInt64, Shape{Shape::kDynamic}),
                 tensor_info("b", DType::kBool, Shape{Shape::kDynamic}),
                 tensor_info("h", DType::kFloat16, Shape{Shape::kDynamic}),
                 tensor_info("t", DType::kString, Shape{Shape::kDynamic})};
    md.outputs = md.inputs;
    return md;
  }();
  return m;
}

bool same_tensor(const gantry::Tensor& a, const gantry::Tensor& b) {
  if (a.dtype() != b.dtype() || !(a.shape() == b.shape())) return false;
  if (a.dtype() == DType::kString) return a.strings() == b.strings();
  return a.byte_size() == b.byte_size() &&
         (a.byte_size() == 0 || std::memcmp(a.data(), b.data(), a.byte_size()) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace ks = gantry::protocol::kserve;
  const std::string body(reinterpret_cast<const char*>(data), size);
  std::string dom;
  dom.reserve(size + size / 2);
  for (size_t i = 0; i < size;) {
    if (body.compare(i, 6, "\"data\"") == 0) {
      dom += "\"\\u0064ata\"";
      i += 6;
    } else {
      dom += body[i++];
    }
  }
  auto fast = ks::parse_infer_request(body, std::nullopt, model());
  auto slow = ks::parse_infer_request(dom, std::nullopt, model());
  if (fast.ok() != slow.ok()) std::abort();
  if (!fast.ok()) {
    const std::string& f = fast.status().message();
    const std::string& s = slow.status().message();
    const bool f_syntax = f.find("not valid JSON") != std::string::npos;
    const bool s_syntax = s.find("not valid JSON") != std::string::npos;
    if (f_syntax != s_syntax || (!f_syntax && f != s) || fast.status().code() != slow.status().code())
      std::abort();
    return 0;
  }
  if (fast->id != slow->id || fast->parameters != slow->parameters ||
      fast->binary_outputs != slow->binary_outputs || fast->outputs.size() != slow->outputs.size() ||
      fast->inputs.size() != slow->inputs.size())
    std::abort();
  for (size_t i = 0; i < fast->inputs.size(); ++i)
    if (fast->inputs[i].name != slow->inputs[i].name ||
        !same_tensor(fast->inputs[i].tensor, slow->inputs[i].tensor))
      std::abort();
  return 0;
}
