// Fuzzes the safetensors header parser (and whatever else the bytes sniff as: .npy, GGUF, ONNX).
#include <cstddef>
#include <cstdint>
#include <span>

#include "weights_fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using gantry::weights::WeightSource;
  gantry::weights::fuzz::check_source(
      WeightSource::borrowed(std::as_bytes(std::span<const uint8_t>(data, size)), "fuzz.safetensors"));
  return 0;
}
