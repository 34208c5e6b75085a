#include "gantry/core/json_reader.h"

#include <cmath>
#include <cstdio>

#include "gantry/core/json.h"

namespace gantry {

namespace {

using nlohmann::json;

JsonFieldError wrong(std::string_view path, std::string_view key, std::string_view want, const json& v) {
  return json_field_error(path, key, "must be " + std::string(want) + ", got " + v.type_name());
}

std::string number_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

}  // namespace

JsonFieldCheck read_json_bool(const json& obj, std::string_view key, std::string_view path, bool& out) {
  const json* v = json_field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) return wrong(path, key, "a boolean", *v);
  out = v->get<bool>();
  return std::nullopt;
}

JsonFieldCheck read_json_string(const json& obj, std::string_view key, std::string_view path,
                                std::string& out) {
  const json* v = json_field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) return wrong(path, key, "a string", *v);
  out = v->get<std::string>();
  return std::nullopt;
}

JsonFieldCheck read_json_int(const json& obj, std::string_view key, std::string_view path, int64_t lo,
                             int64_t hi, std::optional<int64_t>& out, JsonIntegers integers) {
  const json* v = json_field(obj, key);
  if (!v) return std::nullopt;
  auto out_of_range = [&] {
    return json_field_error(
        path, key,
        "must be an integer in " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " + v->dump());
  };
  if (v->is_number_unsigned()) {
    // Unsigned values above int64's range would read as negative int64: compare them as unsigned.
    const uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(hi) || (lo > 0 && u < static_cast<uint64_t>(lo))) return out_of_range();
    out = static_cast<int64_t>(u);
    return std::nullopt;
  }
  if (v->is_number_integer()) {
    const auto x = v->get<int64_t>();
    if (x < lo || x > hi) return out_of_range();
    out = x;
    return std::nullopt;
  }
  if (v->is_number_float() && integers == JsonIntegers::kIntegralFloat) {
    const double d = v->get<double>();
    if (!std::isfinite(d) || d != std::trunc(d)) return wrong(path, key, "an integer", *v);
    if (d < static_cast<double>(lo) || d > static_cast<double>(hi)) return out_of_range();
    out = static_cast<int64_t>(d);
    return std::nullopt;
  }
  return wrong(path, key, "an integer", *v);
}

JsonFieldCheck read_json_number(const json& obj, std::string_view key, std::string_view path, double lo,
                                double hi, std::optional<double>& out) {
  const json* v = json_field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) return wrong(path, key, "a number", *v);
  const auto x = v->get<double>();
  if (!(x >= lo && x <= hi)) {
    return json_field_error(
        path, key, "must be a number in " + number_text(lo) + ".." + number_text(hi) + ", got " + v->dump());
  }
  out = x;
  return std::nullopt;
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
  if (!v->is_array()) return wrong(path, key, want, *v);
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
