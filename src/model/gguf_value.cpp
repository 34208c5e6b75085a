#include <fmt/format.h>

#include <cstring>
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

GgufArray GgufArray::of_fixed(GgufType type, uint64_t count, std::span<const uint8_t> elements) {
  GgufArray a;
  a.element_type_ = type;
  a.size_ = count;
  a.bytes_ = elements;
  return a;
}

GgufArray GgufArray::of_strings(std::span<const uint8_t> bytes, std::vector<uint64_t> offsets) {
  GgufArray a;
  a.element_type_ = GgufType::kString;
  a.size_ = offsets.size();
  a.bytes_ = bytes;
  a.string_offsets_ = std::move(offsets);
  return a;
}

GgufArray GgufArray::of_values(GgufType type, std::vector<GgufValue> values) {
  GgufArray a;
  a.element_type_ = type;
  a.size_ = values.size();
  a.values_ = std::move(values);
  return a;
}

namespace {
template <typename T>
T load(std::span<const uint8_t> bytes, uint64_t i) {
  T v{};
  std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
  return v;
}
}  // namespace

GgufValue GgufArray::at(uint64_t i) const {
  const GgufType t = element_type_;
  switch (t) {
    case GgufType::kUInt8:
      return GgufValue::from_uint(t, load<uint8_t>(bytes_, i));
    case GgufType::kInt8:
      return GgufValue::from_int(t, load<int8_t>(bytes_, i));
    case GgufType::kUInt16:
      return GgufValue::from_uint(t, load<uint16_t>(bytes_, i));
    case GgufType::kInt16:
      return GgufValue::from_int(t, load<int16_t>(bytes_, i));
    case GgufType::kUInt32:
      return GgufValue::from_uint(t, load<uint32_t>(bytes_, i));
    case GgufType::kInt32:
      return GgufValue::from_int(t, load<int32_t>(bytes_, i));
    case GgufType::kUInt64:
      return GgufValue::from_uint(t, load<uint64_t>(bytes_, i));
    case GgufType::kInt64:
      return GgufValue::from_int(t, load<int64_t>(bytes_, i));
    case GgufType::kFloat32:
      return GgufValue::from_float(t, load<float>(bytes_, i));
    case GgufType::kFloat64:
      return GgufValue::from_float(t, load<double>(bytes_, i));
    case GgufType::kBool:
      return GgufValue::from_bool(load<uint8_t>(bytes_, i) != 0);
    case GgufType::kString: {
      const uint64_t at = string_offsets_[i];
      const auto len = load<uint64_t>(bytes_.subspan(at), 0);
      return GgufValue::from_string(std::string(reinterpret_cast<const char*>(bytes_.data() + at + 8), len));
    }
    case GgufType::kArray:
      return values_[i];
  }
  return {};
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
    std::string out = fmt::format("[{} x {}: ", a->size(), gguf_type_name(a->element_type()));
    for (uint64_t i = 0; i < a->size() && i < max_items; ++i) {
      if (i) out += ", ";
      out += a->at(i).to_string(max_items);
    }
    if (a->size() > max_items) out += ", ...";
    return out + "]";
  }
  if (const auto b = as_bool()) return *b ? "true" : "false";
  if (const auto* d = std::get_if<double>(&v_)) return fmt::format("{}", *d);
  if (const auto* i = std::get_if<int64_t>(&v_)) return fmt::format("{}", *i);
  return fmt::format("{}", std::get<uint64_t>(v_));
}

}  // namespace gantry::model
