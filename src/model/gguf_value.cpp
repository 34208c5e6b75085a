#include <fmt/format.h>

#include <limits>

#include "gantry/model/gguf.h"

namespace gantry::model {

std::string_view gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::kUInt8:
      return "u8";
    case GgufType::kInt8:
      return "i8";
    case GgufType::kUInt16:
      return "u16";
    case GgufType::kInt16:
      return "i16";
    case GgufType::kUInt32:
      return "u32";
    case GgufType::kInt32:
      return "i32";
    case GgufType::kFloat32:
      return "f32";
    case GgufType::kBool:
      return "bool";
    case GgufType::kString:
      return "string";
    case GgufType::kArray:
      return "array";
    case GgufType::kUInt64:
      return "u64";
    case GgufType::kInt64:
      return "i64";
    case GgufType::kFloat64:
      return "f64";
  }
  return "unknown";
}

GgufValue GgufValue::from_uint(GgufType t, uint64_t v) {
  GgufValue r;
  r.type_ = t;
  r.v_ = v;
  return r;
}
GgufValue GgufValue::from_int(GgufType t, int64_t v) {
  GgufValue r;
  r.type_ = t;
  r.v_ = v;
  return r;
}
GgufValue GgufValue::from_float(GgufType t, double v) {
  GgufValue r;
  r.type_ = t;
  r.v_ = v;
  return r;
}
GgufValue GgufValue::from_bool(bool v) {
  GgufValue r;
  r.type_ = GgufType::kBool;
  r.v_ = v;
  return r;
}
GgufValue GgufValue::from_string(std::string v) {
  GgufValue r;
  r.type_ = GgufType::kString;
  r.v_ = std::move(v);
  return r;
}
GgufValue GgufValue::from_array(GgufArray v) {
  GgufValue r;
  r.type_ = GgufType::kArray;
  r.v_ = std::make_shared<const GgufArray>(std::move(v));
  return r;
}

std::optional<uint64_t> GgufValue::as_uint() const {
  if (const auto* u = std::get_if<uint64_t>(&v_)) return *u;
  if (const auto* i = std::get_if<int64_t>(&v_); i && *i >= 0) return static_cast<uint64_t>(*i);
  return std::nullopt;
}

std::optional<int64_t> GgufValue::as_int() const {
  if (const auto* i = std::get_if<int64_t>(&v_)) return *i;
  if (const auto* u = std::get_if<uint64_t>(&v_);
      u && *u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return static_cast<int64_t>(*u);
  }
  return std::nullopt;
}

std::optional<double> GgufValue::as_float() const {
  if (const auto* d = std::get_if<double>(&v_)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&v_)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<int64_t>(&v_)) return static_cast<double>(*i);
  return std::nullopt;
}

std::optional<bool> GgufValue::as_bool() const {
  if (const auto* b = std::get_if<bool>(&v_)) return *b;
  return std::nullopt;
}

const std::string* GgufValue::as_string() const { return std::get_if<std::string>(&v_); }

const GgufArray* GgufValue::as_array() const {
  if (const auto* a = std::get_if<std::shared_ptr<const GgufArray>>(&v_)) return a->get();
  return nullptr;
}

std::string GgufValue::to_string(size_t max_items) const {
  if (const auto* s = as_string()) {
    constexpr size_t kMaxChars = 60;
    std::string shown = s->size() > kMaxChars ? s->substr(0, kMaxChars) + "..." : *s;
    for (char& c : shown) {
      if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    }
    return fmt::format("\"{}\"", shown);
  }
  if (const auto* a = as_array()) {
    std::string out = fmt::format("[{} x {}: ", a->items.size(), gguf_type_name(a->element_type));
    for (size_t i = 0; i < a->items.size() && i < max_items; ++i) {
      if (i) out += ", ";
      out += a->items[i].to_string(max_items);
    }
    if (a->items.size() > max_items) out += ", ...";
    return out + "]";
  }
  if (const auto b = as_bool()) return *b ? "true" : "false";
  if (const auto* d = std::get_if<double>(&v_)) return fmt::format("{}", *d);
  if (const auto* i = std::get_if<int64_t>(&v_)) return fmt::format("{}", *i);
  return fmt::format("{}", std::get<uint64_t>(v_));
}

}  // namespace gantry::model
