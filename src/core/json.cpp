#include "gantry/core/json.h"

#include <vector>

namespace gantry {

Status check_json_shape(std::string_view text, std::string_view origin, const JsonShapeLimits& limits) {
  const bool count_members = limits.max_object_members != SIZE_MAX || limits.max_members != SIZE_MAX;
  // Per open container: its members so far, or SIZE_MAX for an array (only while counting).
  std::vector<size_t> open;
  if (count_members) open.reserve(limits.max_depth + 1);
  size_t depth = 0;
  size_t members = 0;
  const size_t n = text.size();
  for (size_t i = 0; i < n; ++i) {
    switch (text[i]) {
      case '"':  // skip the string: up to the next quote no backslash escapes (i then sits on it)
        for (++i; i < n && text[i] != '"'; ++i)
          if (text[i] == '\\') ++i;
        break;
      case '[':
      case '{':
        if (++depth > limits.max_depth)
          return InvalidArgument(std::string(origin) + ": JSON nests deeper than " +
                                 std::to_string(limits.max_depth) +
                                 " levels (arrays and objects inside one another)");
        if (count_members) open.push_back(text[i] == '{' ? 0 : SIZE_MAX);
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        if (count_members && !open.empty()) open.pop_back();
        break;
      case ':':  // a member of the innermost object
        if (!count_members || open.empty() || open.back() == SIZE_MAX) break;
        if (++open.back() > limits.max_object_members)
          return InvalidArgument(std::string(origin) + ": a JSON object has more than " +
                                 std::to_string(limits.max_object_members) + " members");
        if (++members > limits.max_members)
          return InvalidArgument(std::string(origin) + ": JSON objects have more than " +
                                 std::to_string(limits.max_members) + " members in all");
        break;
      default:
        break;
    }
  }
  return Status::Ok();
}

}  // namespace gantry
