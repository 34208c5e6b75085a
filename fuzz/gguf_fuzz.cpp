// libFuzzer target for the GGUF reader (untrusted bytes): parsing, value rendering, typed lookups and tensor
// views. Any crash, sanitizer report or unbounded allocation is a bug. (Links gantry_model only, as
// fuzz/CMakeLists.txt.)
#include <cstddef>
#include <cstdint>
#include <span>

#include "gantry/model/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = gantry::model::GgufFile::parse(std::span<const uint8_t>(data, size), "fuzz.gguf");
  if (!file.ok()) return 0;
  for (const auto& [key, value] : file->metadata()) {
    (void)value.to_string(4);
    (void)value.as_uint();
    (void)value.as_int();
    (void)value.as_float();
  }
  (void)file->get_uint(file->arch_key("block_count"));
  (void)file->get_string("general.name");
  uint64_t sum = 0;
  for (const auto& t : file->tensors()) {
    auto bytes = file->tensor_data(t);
    if (!bytes.empty()) sum += bytes.front() + bytes.back();  // touch both ends: must lie inside the input
  }
  return static_cast<int>(sum & 0);
}
