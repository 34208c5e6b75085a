// The one strict reader of members of a JSON object that came from outside (request bodies, manifests).
//
// Every reader takes the object, the member's key and `path`, the text that goes before the key to make the
// member's full name from the document's root ("" at the root, "options." for Ollama's options object,
// "messages[2]." for a message). A member that is absent or JSON null leaves `out` unchanged and returns no
// error ("not given", as OpenAI's, Anthropic's and Ollama's servers treat null). A member of the wrong type
// or out of range returns a JsonFieldError naming it; `out` is then unchanged. Codecs turn the error into
// their protocol's error shape with `quoted()` ("'n' must be an integer in 1..128, got 0": OpenAI,
// Ollama) or `prefixed()` ("n: must be an integer in 1..128, got 0": Anthropic, manifests), so every front
// end says the same thing about the same mistake.
//
// Duplicate keys are refused when the document is parsed (parse_json_unique_keys in core/json.h), not here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gantry {

struct JsonFieldError {
  std::string field;    // full name from the root: "messages[2].content", "options.num_ctx"
  std::string problem;  // what is wrong, without the name: "must be a string, got number"

  std::string quoted() const { return "'" + field + "' " + problem; }
  std::string prefixed() const { return field + ": " + problem; }
};

// No value: the member was read (or absent); a value: why it was refused.
using JsonFieldCheck = std::optional<JsonFieldError>;

// How integers are accepted.
enum class JsonIntegers {
  kExact,         // only JSON integers: 1.5 and 1.0 are refused
  kIntegralFloat  // also numbers with no fraction (some clients send 100 as 100.0)
};

JsonFieldCheck read_json_bool(const nlohmann::json& obj, std::string_view key, std::string_view path,
                              bool& out);
JsonFieldCheck read_json_string(const nlohmann::json& obj, std::string_view key, std::string_view path,
                                std::string& out);
// An integer in [lo, hi]. Type errors say "must be an integer, got <type>", range errors "must be an
// integer in lo..hi, got <value>".
JsonFieldCheck read_json_int(const nlohmann::json& obj, std::string_view key, std::string_view path,
                             int64_t lo, int64_t hi, std::optional<int64_t>& out,
                             JsonIntegers integers = JsonIntegers::kExact);
// A number in [lo, hi]: "must be a number in 0..2, got 2.5" (bounds printed as %g).
JsonFieldCheck read_json_number(const nlohmann::json& obj, std::string_view key, std::string_view path,
                                double lo, double hi, std::optional<double>& out);
// A string or an array of at most `max_items` strings (OpenAI's and Ollama's `stop`), appended to `out`;
// empty strings are dropped.
JsonFieldCheck read_json_strings(const nlohmann::json& obj, std::string_view key, std::string_view path,
                                 std::vector<std::string>& out, size_t max_items = SIZE_MAX);

// The same checks on a value that is not read by key (an array's element, a member under a key the caller
// iterates): `field` is its full name ("gpu_device_ids[1]"). Here null is a value of the wrong type, not
// "not given".
JsonFieldCheck read_json_bool_value(const nlohmann::json& v, std::string_view field, bool& out);
JsonFieldCheck read_json_string_value(const nlohmann::json& v, std::string_view field, std::string& out);
JsonFieldCheck read_json_int_value(const nlohmann::json& v, std::string_view field, int64_t lo, int64_t hi,
                                   std::optional<int64_t>& out, JsonIntegers integers = JsonIntegers::kExact);
JsonFieldCheck read_json_number_value(const nlohmann::json& v, std::string_view field, double lo, double hi,
                                      std::optional<double>& out);

// A JsonFieldError for a member that is present but not acceptable for a reason of the caller's.
inline JsonFieldError json_field_error(std::string_view path, std::string_view key, std::string problem) {
  return JsonFieldError{std::string(path) + std::string(key), std::move(problem)};
}

}  // namespace gantry
