#include "gantry/core/utf8.h"

#include <cstdint>

namespace gantry {
namespace {

// Checks the sequence at s[i] (Table 3-7 of the Unicode standard: the second byte's range depends on
// the lead byte; E0, ED, F0 and F4 are narrower to rule out overlong forms, surrogates and values past
// U+10FFFF). Returns its length when well-formed; otherwise 0, with `consumed` set to the bytes one
// U+FFFD replaces: the lead plus the continuation bytes that were still valid for it ("maximal subpart").
size_t check_sequence(std::string_view s, size_t i, size_t& consumed) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = byte(i);
  consumed = 1;
  if (c < 0x80) return 1;
  size_t n;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t k = 1; k < n; ++k) {
    if (i + k >= s.size()) return 0;
    const uint8_t b = byte(i + k);
    if (b < lo || b > hi) return 0;
    lo = 0x80, hi = 0xBF;  // only the second byte has a narrower range
    consumed = k + 1;
  }
  return n;
}

}  // namespace

bool is_valid_utf8(std::string_view s) {
  size_t consumed;
  for (size_t i = 0; i < s.size();) {
    const size_t n = check_sequence(s, i, consumed);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string to_valid_utf8(std::string_view s) {
  if (is_valid_utf8(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  size_t consumed;
  for (size_t i = 0; i < s.size();) {
    if (const size_t n = check_sequence(s, i, consumed)) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      i += consumed;
    }
  }
  return out;
}

}  // namespace gantry
