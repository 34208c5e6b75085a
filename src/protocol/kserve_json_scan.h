// The pre-scan of a KServe v2 JSON request's "data" arrays, and the tokenizer it reads them with (private
// to src/server/; kserve_codec.cpp is its one user).
//
// Why: nlohmann's DOM costs about a microsecond and dozens of bytes per number, which dominates a large JSON
// request (a 57 MiB body of numbers peaked at 747 MiB).
//
// Contract of prescan_numeric_data(header): one string-aware pass over the request's JSON text, before
// nlohmann parses it. It finds the "data" arrays of the objects in the top-level "inputs" array. One that
// holds only numbers, true, false, null and nested arrays (at most 64 deep) is read here (numbers with
// std::from_chars, typed as nlohmann types them), replaced by `null` in Prescan::text (the text nlohmann then
// parses) and recorded in Prescan::data under the input's position in "inputs" — by position, so nothing a
// client writes can name an array. The input object's "datatype" and "shape" are read first (before or after
// "data", one pass to the object's end), so each element is converted straight into a buffer of that type and
// size, which becomes the tensor (FastArray::bytes; FastArray::error holds the first element that does not
// fit, with the converters' message); only when the datatype is not plainly written (an escape) is the
// array only checked and counted, and the codec converts it from its text (scan_array again) once the DOM
// has it. Either way nothing is kept per element but the tensor's bytes. Anything else (strings, objects, a
// number from_chars cannot take, odd syntax) stays in the text for nlohmann, so errors and exotic input keep
// the ordinary path and its messages. As in nlohmann, the last of duplicate keys wins. It never fails: at
// worst it takes nothing. json_syntax_error() gives nlohmann's message for text that is not JSON without
// building its DOM.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gantry/core/dtype.h"
#include "gantry/core/status.h"

namespace gantry::protocol::kserve::internal {

// One element of a pre-scanned array, with nlohmann's number typing (unsigned / negative integer /
// float). It mirrors the json calls the element converters use (kserve_elements.h), so both kinds of
// leaf are accepted and rejected alike.
struct Leaf {
  enum class Kind : uint8_t { kInt, kUInt, kFloat, kTrue, kFalse, kNull };
  Kind kind = Kind::kInt;
  union {
    int64_t i = 0;
    uint64_t u;
    double d;
  };

  bool is_number() const { return kind == Kind::kInt || kind == Kind::kUInt || kind == Kind::kFloat; }
  bool is_number_unsigned() const { return kind == Kind::kUInt; }
  bool is_number_integer() const { return kind == Kind::kInt || kind == Kind::kUInt; }  // as nlohmann
  bool is_number_float() const { return kind == Kind::kFloat; }
  bool is_boolean() const { return kind == Kind::kTrue || kind == Kind::kFalse; }
  bool is_string() const { return false; }
  template <typename T>
  T get() const {
    switch (kind) {
      case Kind::kInt:
        return static_cast<T>(i);
      case Kind::kUInt:
        return static_cast<T>(u);
      case Kind::kFloat:
        return static_cast<T>(d);
      case Kind::kTrue:
      case Kind::kFalse:
      case Kind::kNull:
        break;
    }
    return static_cast<T>(kind == Kind::kTrue);
  }
};

struct FastArray {
  size_t begin = 0;   // its text in the header: h[begin] == '[' ...
  size_t end = 0;     // ... to its closing ']', exclusive
  size_t leaves = 0;  // elements, row-major
  int depth = 0;      // deepest array nesting; a flat list is 1
  Leaf first;         // element 0, when there is one
  // Set when converted while scanning: the elements as `dtype` (the request's last "datatype"; room for
  // at least `leaves`), or the first element that does not fit it.
  std::optional<DType> dtype;
  std::shared_ptr<std::byte[]> bytes;
  Status error;
};

struct Prescan {
  std::string_view source;                     // the header as the client sent it
  std::string text;                            // the header with fast arrays replaced; empty when none was
  std::vector<std::optional<FastArray>> data;  // by position in "inputs": its "data", when pre-scanned
  bool rewritten = false;
};

inline bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
inline bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Parses the JSON number at s[pos..]; advances pos past it. False when the grammar or value is not one
// this fast path takes (nlohmann then decides).
[[gnu::always_inline]] inline bool scan_number(std::string_view s, size_t& pos, Leaf& out) {
  const size_t start = pos;
  size_t p = pos;
  const size_t n = s.size();
  bool integral = true;
  if (p < n && s[p] == '-') ++p;
  if (p >= n || !is_digit(s[p])) return false;
  if (s[p] == '0') {
    ++p;
  } else {
    while (p < n && is_digit(s[p])) ++p;
  }
  if (p < n && s[p] == '.') {
    integral = false;
    ++p;
    if (p >= n || !is_digit(s[p])) return false;
    while (p < n && is_digit(s[p])) ++p;
  }
  if (p < n && (s[p] == 'e' || s[p] == 'E')) {
    integral = false;
    ++p;
    if (p < n && (s[p] == '+' || s[p] == '-')) ++p;
    if (p >= n || !is_digit(s[p])) return false;
    while (p < n && is_digit(s[p])) ++p;
  }
  const char* first = s.data() + start;
  const char* last = s.data() + p;
  if (integral) {
    // As nlohmann: a negative integer is int64, a non-negative one uint64, either falling back to double
    // when out of range.
    std::from_chars_result r{};
    if (*first == '-') {
      r = std::from_chars(first, last, out.i);
      out.kind = Leaf::Kind::kInt;
    } else {
      r = std::from_chars(first, last, out.u);
      out.kind = Leaf::Kind::kUInt;
    }
    if (r.ec == std::errc() && r.ptr == last) {
      pos = p;
      return true;
    }
    if (r.ec != std::errc::result_out_of_range) return false;
  }
  auto r = std::from_chars(first, last, out.d);
  if (r.ec != std::errc() || r.ptr != last || !std::isfinite(out.d)) return false;
  out.kind = Leaf::Kind::kFloat;
  pos = p;
  return true;
}

// Parses the element at s[pos..] (a number, true, false or null); advances pos past it.
[[gnu::always_inline]] inline bool scan_leaf(std::string_view s, size_t& pos, Leaf& out) {
  const char c = s[pos];
  if (c == '-' || is_digit(c)) return scan_number(s, pos, out);
  for (auto [word, kind] : {std::pair{std::string_view("true"), Leaf::Kind::kTrue},
                            std::pair{std::string_view("false"), Leaf::Kind::kFalse},
                            std::pair{std::string_view("null"), Leaf::Kind::kNull}}) {
    if (s.substr(pos, word.size()) == word) {
      out.kind = kind;
      pos += word.size();
      return true;
    }
  }
  return false;
}

// Scans the array starting at s[pos] == '[', calling on_leaf(leaf) for each element in row-major order.
// On success returns true, sets pos past its ']' and depth to its deepest nesting (a flat list is 1).
template <typename OnLeaf>
bool scan_array(std::string_view s, size_t& pos, int& depth_out, OnLeaf&& on_leaf) {
  constexpr int kMaxDepth = 64;
  const size_t n = s.size();
  size_t p = pos;
  int depth = 0;
  auto skip = [&] {
    while (p < n && is_space(s[p])) ++p;
  };
  // Alternates between expecting a value and expecting ',' or ']' after one.
  bool expect_value = true;
  while (true) {
    skip();
    if (p >= n) return false;
    if (expect_value) {
      if (s[p] == '[') {
        if (++depth > kMaxDepth) return false;
        depth_out = std::max(depth_out, depth);
        ++p;
        skip();
        if (p < n && s[p] == ']') {  // empty array
          ++p;
          if (--depth == 0) break;
          expect_value = false;
        }
        continue;
      }
      Leaf leaf;
      if (!scan_leaf(s, p, leaf)) return false;
      on_leaf(leaf);
      expect_value = false;
      continue;
    }
    if (s[p] == ',') {
      ++p;
      expect_value = true;
    } else if (s[p] == ']') {
      ++p;
      if (--depth == 0) break;
    } else {
      return false;
    }
  }
  pos = p;
  return true;
}

// Scans `header` (the JSON text of a request) for "data" arrays the fast path takes; see above.
Prescan prescan_numeric_data(std::string_view header);

// nlohmann's message for why `text` is not JSON (nullopt when it is), found without building its DOM: the
// text may be a large body whose numbers the pre-scan already took.
std::optional<std::string> json_syntax_error(std::string_view text);

}  // namespace gantry::protocol::kserve::internal
