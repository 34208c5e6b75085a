#include "gantry/core/json_reader.h"

#include <cmath>
#include <cstdio>

#include "gantry/core/json.h"

namespace gantry {

namespace {

using nlohmann::json;

std::string full_name(std::string_view path, std::string_view key) {
  return std::string(path) + std::string(key);
}

JsonFieldError wrong(std::string_view field, std::string_view want, const json& v) {
  return JsonFieldError{std::string(field), "must be " + std::string(want) + ", got " + v.type_name()};
}

std::string number_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

}  // namespace

JsonFieldCheck read_json_bool_value(const json& v, std::string_view field, bool& out) {
  if (!v.is_boolean()) return wrong(field, "a boolean", v);
  out = v.get<bool>();
  return std::nullopt;
}

JsonFieldCheck read_json_string_value(const json& v, std::string_view field, std::string& out) {
  if (!v.is_string()) return wrong(field, "a string", v);
  out = v.get<std::string>();
  return std::nullopt;
}

JsonFieldCheck read_json_int_value(const json& v, std::string_view field, int64_t lo, int64_t hi,
                                   std::optional<int64_t>& out, JsonIntegers integers) {
  auto out_of_range = [&] {
    return JsonFieldError{std::string(field), "must be an integer in " + std::to_string(lo) + ".." +
                                                  std::to_string(hi) + ", got " + v.dump()};
  };
  if (v.is_number_unsigned()) {
    // Unsigned values above int64's range would read as negative int64: compare them as unsigned.
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi) || (lo > 0 && u < static_cast<uint64_t>(lo))) return out_of_range();
    out = static_cast<int64_t>(u);
    return std::nullopt;
  }
  if (v.is_number_integer()) {
    const auto x = v.get<int64_t>();
    if (x < lo || x > hi) return out_of_range();
    out = x;
    return std::nullopt;
  }
  if (v.is_number_float() && integers == JsonIntegers::kIntegralFloat) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::trunc(d)) return wrong(field, "an integer", v);
    if (d < static_cast<double>(lo) || d > static_cast<double>(hi)) return out_of_range();
    out = static_cast<int64_t>(d);
    return std::nullopt;
  }
  return wrong(field, "an integer", v);
}

JsonFieldCheck read_json_number_value(const json& v, std::string_view field, double lo, double hi,
                                      std::optional<double>& out) {
  if (!v.is_number()) return wrong(field, "a number", v);
  const auto x = v.get<double>();
  if (!(x >= lo && x <= hi)) {
    return JsonFieldError{std::string(field), "must be a number in " + number_text(lo) + ".." +
                                                  number_text(hi) + ", got " + v.dump()};
  }
  out = x;
  return std::nullopt;
}

JsonFieldCheck read_json_bool(const json& obj, std::string_view key, std::string_view path, bool& out) {
  const json* v = json_field(obj, key);
  return v ? read_json_bool_value(*v, full_name(path, key), out) : std::nullopt;
}

JsonFieldCheck read_json_string(const json& obj, std::string_view key, std::string_view path,
                                std::string& out) {
  const json* v = json_field(obj, key);
  return v ? read_json_string_value(*v, full_name(path, key), out) : std::nullopt;
}

JsonFieldCheck read_json_int(const json& obj, std::string_view key, std::string_view path, int64_t lo,
                             int64_t hi, std::optional<int64_t>& out, JsonIntegers integers) {
  const json* v = json_field(obj, key);
  return v ? read_json_int_value(*v, full_name(path, key), lo, hi, out, integers) : std::nullopt;
}

JsonFieldCheck read_json_number(const json& obj, std::string_view key, std::string_view path, double lo,
                                double hi, std::optional<double>& out) {
  const json* v = json_field(obj, key);
  return v ? read_json_number_value(*v, full_name(path, key), lo, hi, out) : std::nullopt;
}

JsonFieldCheck read_json_strings(const json& obj, std::string_view key, std::string_view path,
                                 std::vector<std::string>& out, size_t max_items) {
  const json* v = json_field(obj, key);
  if (!v) return std::nullopt;
  const std::string want = max_items == SIZE_MAX
                               ? std::string("a string or an array of strings")
                               : "a string or an array of up to " + std::to_string(max_items) + " strings";
  if (v->is_string()) {
    if (!v->get_ref<const std::string&>().empty()) out.push_back(v->get<std::string>());
    return std::nullopt;
  }
  if (!v->is_array()) return wrong(full_name(path, key), want, *v);
  if (v->size() > max_items) {
    return json_field_error(path, key, "must be " + want + ", got " + std::to_string(v->size()) + " strings");
  }
  std::vector<std::string> read;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& x = (*v)[i];
    if (!x.is_string()) {
      return json_field_error(
          path, key,
          "must be " + want + ", got an element of type " + x.type_name() + " at " + std::to_string(i));
    }
    if (!x.get_ref<const std::string&>().empty()) read.push_back(x.get<std::string>());
  }
  out.insert(out.end(), read.begin(), read.end());
  return std::nullopt;
}

}  // namespace gantry
