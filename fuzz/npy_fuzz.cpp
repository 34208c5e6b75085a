// Fuzzes the .npy reader: any bytes must give a tensor or an error; an accepted tensor must serialise and
// read back with the same dtype, shape and contents.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "gantry/core/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto t = gantry::parse_npy(std::as_bytes(std::span<const uint8_t>(data, size)));
  if (!t.ok()) {
    if (t.status().message().empty()) std::abort();
    return 0;
  }
  auto bytes = gantry::serialize_npy(*t);
  if (!bytes.ok()) std::abort();
  auto back = gantry::parse_npy(std::as_bytes(std::span<const char>(bytes->data(), bytes->size())));
  if (!back.ok() || back->dtype() != t->dtype() || !(back->shape() == t->shape())) std::abort();
  if (t->dtype() == gantry::DType::kString) {
    if (back->strings() != t->strings()) std::abort();
  } else if (t->byte_size() != back->byte_size() ||
             (t->byte_size() > 0 && std::memcmp(t->data(), back->data(), t->byte_size()) != 0)) {
    std::abort();
  }
  return 0;
}
