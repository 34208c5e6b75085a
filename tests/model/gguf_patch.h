// Changes one scalar metadata value of a real GGUF file in place (same type, same width), so tests and
// fuzz seeds get "a valid model with one field wrong" without a GGUF writer.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace gantry::model::testing {

// `bytes` with metadata `key` (a u32/i32/u64/i64/f32/f64 scalar) set to `value`. Throws when the key is
// absent or not such a scalar (a test set-up error, not a tested path).
inline std::string patch_gguf_scalar(std::string bytes, const std::string& key, double value) {
  std::string needle(8, '\0');
  const uint64_t len = key.size();
  std::memcpy(needle.data(), &len, 8);
  needle += key;
  const size_t at = bytes.find(needle);
  if (at == std::string::npos) throw std::runtime_error("GGUF key not found: " + key);
  const size_t type_at = at + needle.size();
  uint32_t type = 0;
  std::memcpy(&type, bytes.data() + type_at, 4);
  char* v = bytes.data() + type_at + 4;
  auto put = [v](auto x) { std::memcpy(v, &x, sizeof x); };
  switch (type) {
    case 4:
      put(static_cast<uint32_t>(value));
      break;
    case 5:
      put(static_cast<int32_t>(value));
      break;
    case 6:
      put(static_cast<float>(value));
      break;
    case 10:
      put(static_cast<uint64_t>(value));
      break;
    case 11:
      put(static_cast<int64_t>(value));
      break;
    case 12:
      put(value);
      break;
    default:
      throw std::runtime_error("GGUF key " + key + " has type " + std::to_string(type));
  }
  return bytes;
}

}  // namespace gantry::model::testing
