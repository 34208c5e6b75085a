// The CLI spellings of the transformations (see transform.h).
#include <charconv>
#include <string>
#include <vector>

#include "gantry/weights/transform.h"

namespace gantry::weights {
namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t pos = 0;
  while (true) {
    const size_t next = s.find(sep, pos);
    parts.push_back(s.substr(pos, next == std::string_view::npos ? std::string_view::npos : next - pos));
    if (next == std::string_view::npos) return parts;
    pos = next + 1;
  }
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

bool parse_int(std::string_view s, int64_t& out) {
  s = trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size();
}

Result<std::vector<int64_t>> parse_int_list(std::string_view what, std::string_view s) {
  std::vector<int64_t> values;
  if (trim(s).empty()) return values;
  for (std::string_view part : split(s, ',')) {
    int64_t v = 0;
    if (!parse_int(part, v))
      return InvalidArgument(std::string(what) + " '" + std::string(s) + "': '" + std::string(part) +
                             "' is not an integer (expected a comma-separated list such as 1,0)");
    values.push_back(v);
  }
  return values;
}

}  // namespace

Result<Transform> parse_cast(std::string_view s) {
  const auto t = parse_dtype(trim(s));
  if (!t || *t == DType::kString)
    return InvalidArgument(
        "cast '" + std::string(s) +
        "': not an element type (f32, f16, bf16, f64, f8e4m3, f8e5m2, i8..i64, u8..u64, bool)");
  return Transform{Cast{*t}};
}

Result<Transform> parse_transpose(std::string_view s) {
  GANTRY_ASSIGN_OR_RETURN(auto values, parse_int_list("transpose", s));
  Transpose t;
  for (int64_t v : values) {
    if (v < 0 || v > 1024)
      return InvalidArgument("transpose '" + std::string(s) + "': " + std::to_string(v) +
                             " is not a dimension index");
    t.perm.push_back(static_cast<int>(v));
  }
  return Transform{t};
}

Result<Transform> parse_reshape(std::string_view s) {
  GANTRY_ASSIGN_OR_RETURN(auto values, parse_int_list("reshape", s));
  for (int64_t v : values)
    if (v < -1)
      return InvalidArgument("reshape '" + std::string(s) + "': " + std::to_string(v) +
                             " is not a dimension (>= 0, or -1 for the inferred one)");
  return Transform{Reshape{values}};
}

Result<Transform> parse_slice(std::string_view s) {
  Slice out;
  for (std::string_view part : split(s, ',')) {
    const auto fields = split(part, ':');
    if (fields.size() < 2 || fields.size() > 3)
      return InvalidArgument("slice '" + std::string(s) + "': '" + std::string(part) +
                             "' is not start:stop or start:stop:step (each part may be empty, e.g. ::2)");
    SliceDim d;
    int64_t* targets[3] = {&d.start, &d.stop, &d.step};
    for (size_t i = 0; i < fields.size(); ++i) {
      if (trim(fields[i]).empty()) continue;
      if (!parse_int(fields[i], *targets[i]))
        return InvalidArgument("slice '" + std::string(s) + "': '" + std::string(fields[i]) +
                               "' is not an integer");
    }
    if (d.step <= 0) return InvalidArgument("slice '" + std::string(s) + "': step must be > 0");
    out.dims.push_back(d);
  }
  return Transform{out};
}

Result<Transform> parse_quantize(std::string_view s) {
  const auto t = model::ggml_type_by_name(trim(s));
  if (!t || (t->type != model::GgmlType::kQ8_0 && t->type != model::GgmlType::kQ4_0))
    return InvalidArgument("quantize '" + std::string(s) + "': only q8_0 and q4_0 can be produced");
  return Transform{Quantize{t->type}};
}

}  // namespace gantry::weights
