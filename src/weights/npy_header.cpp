#include "weights/npy_header.h"

#include <charconv>
#include <cstring>
#include <string_view>

namespace gantry::weights {
namespace {

std::optional<DType> npy_dtype(std::string_view d) {
  if (d.size() < 3) return std::nullopt;
  const char order = d[0];
  const std::string_view t = d.substr(1);
  const bool one_byte = t == "i1" || t == "u1" || t == "b1";
  if (!(order == '<' || order == '|' || order == '=' || (order == '>' && one_byte))) return std::nullopt;
  if (t == "f4") return DType::kFloat32;
  if (t == "f2") return DType::kFloat16;
  if (t == "f8") return DType::kFloat64;
  if (t == "i1") return DType::kInt8;
  if (t == "i2") return DType::kInt16;
  if (t == "i4") return DType::kInt32;
  if (t == "i8") return DType::kInt64;
  if (t == "u1") return DType::kUInt8;
  if (t == "u2") return DType::kUInt16;
  if (t == "u4") return DType::kUInt32;
  if (t == "u8") return DType::kUInt64;
  if (t == "b1") return DType::kBool;
  return std::nullopt;
}

// The text after "'key':" with spaces skipped, or npos.
size_t value_pos(std::string_view h, std::string_view key) {
  const std::string k1 = "'" + std::string(key) + "'";
  size_t p = h.find(k1);
  if (p == std::string_view::npos) return p;
  p = h.find(':', p + k1.size());
  if (p == std::string_view::npos) return p;
  ++p;
  while (p < h.size() && h[p] == ' ') ++p;
  return p;
}

}  // namespace

Result<NpyHeader> parse_npy_header(std::span<const std::byte> bytes, const std::string& label) {
  auto byte = [&](size_t i) { return std::to_integer<uint8_t>(bytes[i]); };
  if (bytes.size() < 10 || byte(0) != 0x93 || std::memcmp(bytes.data() + 1, "NUMPY", 5) != 0)
    return Corrupt(label + ": not a .npy array (bad magic)");
  const uint8_t major = byte(6);
  uint64_t len = 0, start = 0;
  if (major == 1) {
    len = byte(8) | (uint64_t{byte(9)} << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return Corrupt(label + ": truncated .npy header");
    len = byte(8) | (uint64_t{byte(9)} << 8) | (uint64_t{byte(10)} << 16) | (uint64_t{byte(11)} << 24);
    start = 12;
  } else {
    return Unsupported(label + ": .npy format version " + std::to_string(major) + " (1, 2 and 3 are read)");
  }
  if (len > bytes.size() - start) return Corrupt(label + ": the .npy header runs past the end of the data");
  const std::string_view h(reinterpret_cast<const char*>(bytes.data()) + start, len);
  NpyHeader out;
  out.data_offset = start + len;

  size_t p = value_pos(h, "descr");
  if (p == std::string_view::npos || p >= h.size() || h[p] != '\'')
    return Corrupt(label + ": .npy header has no 'descr'");
  const size_t q = h.find('\'', p + 1);
  if (q == std::string_view::npos) return Corrupt(label + ": .npy header: unterminated 'descr'");
  const auto descr = h.substr(p + 1, q - p - 1);
  const auto dt = npy_dtype(descr);
  if (!dt)
    return Unsupported(label + ": .npy dtype '" + std::string(descr) +
                       "' (little-endian f2/f4/f8, i1..i8, u1..u8 and b1 are read)");
  out.dtype = *dt;

  p = value_pos(h, "fortran_order");
  if (p == std::string_view::npos) return Corrupt(label + ": .npy header has no 'fortran_order'");
  if (h.substr(p).starts_with("True")) return Unsupported(label + ": Fortran-order .npy arrays are not read");
  if (!h.substr(p).starts_with("False")) return Corrupt(label + ": .npy header: bad 'fortran_order'");

  p = value_pos(h, "shape");
  if (p == std::string_view::npos || p >= h.size() || h[p] != '(')
    return Corrupt(label + ": .npy header has no 'shape'");
  const size_t close = h.find(')', p);
  if (close == std::string_view::npos) return Corrupt(label + ": .npy header: unterminated 'shape'");
  std::vector<int64_t> dims;
  std::string_view s = h.substr(p + 1, close - p - 1);
  while (!s.empty()) {
    while (!s.empty() && (s.front() == ' ' || s.front() == ',')) s.remove_prefix(1);
    if (s.empty()) break;
    int64_t v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || v < 0)
      return Corrupt(label + ": .npy header: bad shape '" + std::string(h.substr(p, close - p + 1)) + "'");
    dims.push_back(v);
    s.remove_prefix(static_cast<size_t>(end - s.data()));
    while (!s.empty() && s.front() == 'L') s.remove_prefix(1);  // Python 2 longs
  }
  out.shape = Shape(std::move(dims));
  return out;
}

}  // namespace gantry::weights
