// Parsing JSON from untrusted text without exceptions escaping.
//
// nlohmann::json::parse(..., allow_exceptions=false) still throws out_of_range for number overflow
// (e.g. "1e6079"), so every parser of untrusted JSON goes through parse_json() instead.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "gantry/core/status.h"

namespace gantry {

// Parses `text`; `origin` names the file or stream in the error ("<origin>: not valid JSON: ...").
template <typename Json = nlohmann::json>
Result<Json> parse_json(std::string_view text, std::string_view origin) {
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string(origin) + ": not valid JSON: " + e.what());
  }
}

// Like parse_json, for documents where a repeated key is an attacker's trick rather than a typo: a key that
// appears twice in one object is an InvalidArgument naming it ("<origin>: duplicate key 'name'") instead of
// the last one silently winning. Linear time: one hash set per open object.
template <typename Json = nlohmann::json>
Result<Json> parse_json_unique_keys(std::string_view text, std::string_view origin) {
  struct Duplicate {
    std::string key;
  };
  std::vector<std::unordered_set<std::string>> open_objects;
  auto check = [&](int /*depth*/, nlohmann::json::parse_event_t event, Json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) open_objects.emplace_back();
    if (event == E::object_end && !open_objects.empty()) open_objects.pop_back();
    if (event == E::key && !open_objects.empty()) {
      std::string key = parsed.template get<std::string>();
      if (!open_objects.back().insert(key).second) throw Duplicate{std::move(key)};
    }
    return true;
  };
  try {
    return Json::parse(text, check);
  } catch (const Duplicate& d) {
    return InvalidArgument(std::string(origin) + ": duplicate key '" + d.key +
                           "' (a key may appear only once in an object)");
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string(origin) + ": not valid JSON: " + e.what());
  }
}

}  // namespace gantry
