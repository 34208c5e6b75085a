#include "gantry/core/json.h"

#include <malloc.h>

#include <vector>

namespace gantry {

namespace json_detail {

namespace {
constexpr size_t kTrimAfterDomBytes = size_t{64} << 20;
}  // namespace

Status dom_budget_error(std::string_view origin, size_t max_dom_bytes, size_t text_bytes) {
  // The partial DOM just freed was max_dom_bytes of small blocks, which glibc keeps in the parsing thread's
  // arena rather than returning them (measured: 60 MiB of "[{},...]" left RSS ~280 MiB higher after the
  // 400, per worker thread, for good). Hand them back when that is worth a pass over the arenas.
  if (max_dom_bytes >= kTrimAfterDomBytes) malloc_trim(0);
  std::string why = max_dom_bytes == json_dom_budget(text_bytes)
                        ? " (" + std::to_string(kJsonDomBytesPerTextByte) + "x its " +
                              std::to_string(text_bytes) + " bytes plus " +
                              std::to_string(kJsonDomAllowance >> 20) +
                              " MiB, the most a JSON document from a client may take)"
                        : "";
  return InvalidArgument(std::string(origin) + ": the JSON would take more than " +
                         std::to_string(max_dom_bytes) + " bytes of memory once parsed, over the limit" +
                         why + "; its arrays, objects and short strings cost far more than their text");
}

}  // namespace json_detail

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
