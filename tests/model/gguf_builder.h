// Writes small GGUF files byte by byte for the reader tests (valid ones and deliberately broken ones).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace gantry::model::testing {

class GgufBuilder {
 public:
  std::vector<uint8_t> bytes;

  GgufBuilder& raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
    return *this;
  }
  GgufBuilder& u8(uint8_t v) { return raw(&v, 1); }
  GgufBuilder& u16(uint16_t v) { return raw(&v, 2); }
  GgufBuilder& u32(uint32_t v) { return raw(&v, 4); }
  GgufBuilder& u64(uint64_t v) { return raw(&v, 8); }
  GgufBuilder& i32(int32_t v) { return raw(&v, 4); }
  GgufBuilder& f32(float v) { return raw(&v, 4); }
  GgufBuilder& f64(double v) { return raw(&v, 8); }
  GgufBuilder& str(const std::string& s) { return u64(s.size()).raw(s.data(), s.size()); }
  GgufBuilder& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return raw("GGUF", 4).u32(version).u64(n_tensors).u64(n_kv);
  }
  // Key + type 4 (u32) + value.
  GgufBuilder& kv_u32(const std::string& key, uint32_t v) { return str(key).u32(4).u32(v); }
  GgufBuilder& kv_str(const std::string& key, const std::string& v) { return str(key).u32(8).str(v); }
  GgufBuilder& tensor_info(const std::string& name, std::vector<uint64_t> dims, uint32_t type,
                           uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  GgufBuilder& pad_to(size_t alignment) {
    while (bytes.size() % alignment) bytes.push_back(0);
    return *this;
  }
  GgufBuilder& zeros(size_t n) {
    bytes.insert(bytes.end(), n, 0);
    return *this;
  }
};

}  // namespace gantry::model::testing
