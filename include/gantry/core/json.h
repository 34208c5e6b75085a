// Parsing JSON from untrusted text without exceptions escaping.
//
// nlohmann::json::parse(..., allow_exceptions=false) still throws out_of_range for number overflow
// (e.g. "1e6079"), so every parser of untrusted JSON goes through parse_json() instead.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

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

}  // namespace gantry
