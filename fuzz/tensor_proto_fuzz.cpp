// Fuzzes the ONNX TensorProto reader: any bytes must give a tensor or an error (sizes are checked before
// allocating); an accepted tensor must serialise and read back unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "gantry/model/tensor_proto.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto t = gantry::model::parse_tensor_proto(std::as_bytes(std::span<const uint8_t>(data, size)));
  if (!t.ok()) {
    if (t.status().message().empty()) std::abort();
    return 0;
  }
  auto bytes = gantry::model::serialize_tensor_proto(t->tensor, t->name);
  if (!bytes.ok()) std::abort();
  auto back =
      gantry::model::parse_tensor_proto(std::as_bytes(std::span<const char>(bytes->data(), bytes->size())));
  if (!back.ok() || back->name != t->name || back->tensor.dtype() != t->tensor.dtype() ||
      !(back->tensor.shape() == t->tensor.shape()))
    std::abort();
  if (t->tensor.dtype() == gantry::DType::kString) {
    if (back->tensor.strings() != t->tensor.strings()) std::abort();
  } else if (t->tensor.byte_size() != back->tensor.byte_size() ||
             (t->tensor.byte_size() > 0 &&
              std::memcmp(t->tensor.data(), back->tensor.data(), t->tensor.byte_size()) != 0)) {
    std::abort();
  }
  return 0;
}
