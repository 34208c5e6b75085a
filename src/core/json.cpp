#include "gantry/core/json.h"

namespace gantry {

Status check_json_depth(std::string_view text, std::string_view origin, size_t max_depth) {
  size_t depth = 0;
  const size_t n = text.size();
  for (size_t i = 0; i < n; ++i) {
    switch (text[i]) {
      case '"':  // skip the string: up to the next quote no backslash escapes (i then sits on it)
        for (++i; i < n && text[i] != '"'; ++i)
          if (text[i] == '\\') ++i;
        break;
      case '[':
      case '{':
        if (++depth > max_depth)
          return InvalidArgument(std::string(origin) + ": JSON nests deeper than " +
                                 std::to_string(max_depth) +
                                 " levels (arrays and objects inside one another)");
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return Status::Ok();
}

}  // namespace gantry
