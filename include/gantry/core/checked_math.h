// Overflow-aware arithmetic on sizes and counts that come from untrusted files or flags.
//
// checked_*: nullopt when the exact result does not fit. saturating_*: the exact result, or the type's
// maximum when it does not fit (a byte count that saturates can never "fit" anywhere, so callers that
// compare against free memory stay correct and report the overflow once at the end).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>

namespace gantry {

inline std::optional<uint64_t> checked_add(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline uint64_t saturating_add(uint64_t a, uint64_t b) {
  return checked_add(a, b).value_or(std::numeric_limits<uint64_t>::max());
}

inline uint64_t saturating_mul(uint64_t a, uint64_t b) {
  return checked_mul(a, b).value_or(std::numeric_limits<uint64_t>::max());
}

template <typename... T>
uint64_t saturating_product(uint64_t first, T... rest) {
  uint64_t r = first;
  ((r = saturating_mul(r, static_cast<uint64_t>(rest))), ...);
  return r;
}

inline constexpr uint64_t kSaturated = std::numeric_limits<uint64_t>::max();

}  // namespace gantry
