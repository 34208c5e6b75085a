#include "kserve_json_scan.h"

#include <array>
#include <cstring>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>

#include "gantry/protocol/kserve_codec.h"
#include "kserve_elements.h"

namespace gantry::protocol::kserve::internal {
namespace {

// The element count of the "shape" array at h[pos] == '[', when it is a flat list of non-negative
// integers (a hint for the buffer of a "data" that follows; parse_shape decides what the shape is).
std::optional<uint64_t> shape_count(std::string_view h, size_t pos) {
  uint64_t count = 1;
  bool ok = true;
  int depth = 0;
  const bool scanned = scan_array(h, pos, depth, [&](const Leaf& d) {
    if (d.kind != Leaf::Kind::kUInt || (d.u != 0 && count > std::numeric_limits<uint64_t>::max() / d.u))
      ok = false;
    else
      count *= d.u;
  });
  if (!scanned || !ok || depth != 1) return std::nullopt;
  return count;
}

// Element bytes of one "data" array as it is converted: room for `capacity` elements, grown by doubling
// when the shape's count was not known (or not true), never beyond what the rest of the text can hold.
class ElementBuffer {
 public:
  ElementBuffer(size_t elem_size, size_t capacity, size_t most)
      : elem_size_(elem_size), most_(std::max<size_t>(most, 1)) {
    grow_to(std::clamp<size_t>(capacity, 1, most_));
  }
  // The buffer with room for element `i`; null when out of memory.
  std::byte* room_for(size_t i) {
    if (i >= capacity_ && bytes_) grow_to(std::min(std::max(capacity_ * 2, i + 1), std::max(most_, i + 1)));
    return bytes_.get();
  }
  std::shared_ptr<std::byte[]> release() { return std::move(bytes_); }

 private:
  void grow_to(size_t capacity) {
    std::unique_ptr<std::byte[]> bigger(new (std::nothrow) std::byte[capacity * elem_size_]);
    if (bigger && bytes_) std::memcpy(bigger.get(), bytes_.get(), capacity_ * elem_size_);
    bytes_ = std::move(bigger);
    capacity_ = capacity;
  }
  size_t elem_size_;
  size_t most_;
  size_t capacity_ = 0;
  std::unique_ptr<std::byte[]> bytes_;
};

// Scans the "data" array at h[begin] == '['; nullopt when it is not one the fast path takes. Its elements
// are converted to `dtype` as they are read when that is known and numeric (or BOOL).
std::optional<FastArray> scan_data(std::string_view h, size_t begin, std::optional<DType> dtype,
                                   std::optional<uint64_t> count_hint) {
  FastArray a;
  a.begin = begin;
  size_t pos = begin;
  auto count = [&](const Leaf& leaf) {
    if (a.leaves++ == 0) a.first = leaf;
  };
  if (!dtype || *dtype == DType::kString) {
    if (!scan_array(h, pos, a.depth, count)) return std::nullopt;
    a.end = pos;
    return a;
  }
  // Every element takes at least two characters ("1,"), which bounds the buffer whatever "shape" says.
  const size_t most = (h.size() - begin) / 2 + 1;
  ElementBuffer buffer(dtype_size(*dtype), count_hint.value_or(size_t{1} << 16), most);
  bool scanned = false;
  Status st = with_converter(*dtype, [&](auto convert) {
    scanned = scan_array(h, pos, a.depth, [&](const Leaf& leaf) {
      const size_t i = a.leaves;
      count(leaf);
      if (!a.error.ok()) return;
      std::byte* dst = buffer.room_for(i);
      if (!dst) {
        a.error = ResourceExhausted("out of host memory for " + std::to_string(i + 1) + " elements");
        return;
      }
      if (Status st = convert(leaf, i, dst); !st.ok()) a.error = std::move(st);
    });
    return Status::Ok();
  });
  if (!scanned || !st.ok()) return std::nullopt;
  a.end = pos;
  a.dtype = dtype;
  a.bytes = buffer.release();
  return a;
}

// Index of the '"' closing the string that opens at h[i], or h.size() when unterminated.
size_t string_end(std::string_view h, size_t i) {
  for (++i; i < h.size() && h[i] != '"'; ++i)
    if (h[i] == '\\') ++i;
  return std::min(i, h.size());
}

// Index of the first non-space at or after i.
size_t skip_spaces(std::string_view h, size_t i) {
  while (i < h.size() && is_space(h[i])) ++i;
  return i;
}

// The datatype named by the JSON string token `token` (quotes included), when it is one written plainly.
std::optional<DType> datatype_token(std::string_view token) {
  if (token.size() < 2 || token.front() != '"' || token.back() != '"' ||
      token.find('\\') != std::string_view::npos)
    return std::nullopt;
  return parse_datatype(token.substr(1, token.size() - 2));
}

// What an input object's keys say about its "data": its "datatype" and the element count of its "shape",
// the last of each (as nlohmann keeps the last of duplicate keys), when plainly written.
struct InputHints {
  bool has_datatype = false;
  std::optional<DType> dtype;
  bool has_shape = false;
  std::optional<uint64_t> count;

  // Takes the key `token` (quotes included) whose value starts at h[value].
  void key(std::string_view h, std::string_view token, size_t value) {
    const bool has_value = value < h.size();
    if (token == "\"datatype\"") {
      has_datatype = true;
      dtype = has_value && h[value] == '"' ? datatype_token(h.substr(value, string_end(h, value) + 1 - value))
                                           : std::nullopt;
    } else if (token == "\"shape\"") {
      has_shape = true;
      count = has_value && h[value] == '[' ? shape_count(h, value) : std::nullopt;
    }
  }
};

// The hints among the keys of the object that h[pos] is inside, from pos to the object's end: one
// string-aware pass, so a "datatype" written after "data" (keys in sorted order) is known before the
// data is read.
InputHints hints_after(std::string_view h, size_t pos) {
  // Most of what this passes over is numbers: skip to the next character that matters by table.
  static constexpr auto kStructural = [] {
    std::array<bool, 256> t{};
    for (char c : {'"', '[', ']', '{', '}'}) t[static_cast<unsigned char>(c)] = true;
    return t;
  }();
  InputHints out;
  int depth = 1;
  for (size_t i = pos; i < h.size(); ++i) {
    const char c = h[i];
    if (!kStructural[static_cast<unsigned char>(c)]) continue;
    if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) break;
    } else if (c == '"') {
      const size_t end = string_end(h, i);
      if (depth == 1) {
        const size_t colon = skip_spaces(h, end + 1);
        if (colon < h.size() && h[colon] == ':')
          out.key(h, h.substr(i, end + 1 - i), skip_spaces(h, colon + 1));
      }
      i = end;
    }
  }
  return out;
}

}  // namespace

Prescan prescan_numeric_data(std::string_view h) {
  Prescan out;
  out.source = h;
  size_t copied = 0;                // h[0, copied) is already in out.text
  int depth = 0;                    // open containers outside strings
  char opened[3] = {0, 0, 0};       // the kinds of the first three
  bool key_is_inputs = false;       // the last key of the top-level object was "inputs"
  bool in_inputs = false;           // inside the top-level "inputs" array
  size_t element = 0;               // position in it
  InputHints hints;                 // the current input object's keys so far
  std::optional<InputHints> after;  // ... and after its first "data", looked up there once
  for (size_t i = 0; i < h.size();) {
    const char c = h[i];
    if (c == '{' || c == '[') {
      if (depth >= 0 && depth < 3) opened[depth] = c;
      if (depth == 1 && opened[0] == '{' && c == '[' && key_is_inputs) {
        in_inputs = true;  // a later duplicate "inputs" replaces an earlier one, as in nlohmann
        element = 0;
        out.data.clear();
      }
      if (depth == 2 && in_inputs) {
        hints = {};
        after.reset();
      }
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth <= 1) in_inputs = false;
    } else if (c == ',' && depth == 2 && in_inputs) {
      ++element;
    } else if (c == '"') {
      const size_t end = string_end(h, i);
      const std::string_view token = h.substr(i, end + 1 - i);
      size_t j = skip_spaces(h, end + 1);
      const bool is_key = j < h.size() && h[j] == ':';
      if (is_key && depth == 1) key_is_inputs = token == "\"inputs\"";
      if (is_key && depth == 3 && in_inputs && opened[2] == '{') {
        j = skip_spaces(h, j + 1);
        hints.key(h, token, j);
        if (token == "\"data\"") {
          if (out.data.size() <= element) out.data.resize(element + 1);
          out.data[element].reset();  // unless this one is taken below
          if (!after) after = hints_after(h, j);
          // Where a "datatype" follows the first "data", the last one does; else the last one before.
          const InputHints& last_dtype = after->has_datatype ? *after : hints;
          const InputHints& last_shape = after->has_shape ? *after : hints;
          const bool is_array = j < h.size() && h[j] == '[';
          if (auto array = is_array ? scan_data(h, j, last_dtype.dtype, last_shape.count) : std::nullopt) {
            const size_t array_end = array->end;
            if (!out.rewritten) out.text.reserve(std::min<size_t>(h.size(), 4096));
            out.rewritten = true;
            out.text.append(h.substr(copied, j - copied));
            out.text += "null";
            out.data[element] = std::move(*array);
            copied = array_end;
            i = array_end;
            continue;
          }
        }
      }
      i = end;
    }
    ++i;
  }
  if (out.rewritten) out.text.append(h.substr(copied));
  return out;
}

std::optional<std::string> json_syntax_error(std::string_view text) {
  struct Checker : nlohmann::json_sax<nlohmann::json> {
    std::optional<std::string> error;
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override { return true; }
    bool key(string_t&) override { return true; }
    bool end_object() override { return true; }
    bool start_array(std::size_t) override { return true; }
    bool end_array() override { return true; }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
      error = e.what();
      return false;
    }
  };
  Checker checker;
  nlohmann::json::sax_parse(text, &checker);
  return checker.error;
}

}  // namespace gantry::protocol::kserve::internal
