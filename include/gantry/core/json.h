// Parsing JSON from untrusted text without exceptions escaping, and without documents too deep to walk.
//
// nlohmann::json::parse(..., allow_exceptions=false) still throws out_of_range for number overflow
// (e.g. "1e6079"), so every parser of untrusted JSON goes through parse_json() instead.
//
// Depth: nlohmann parses iteratively, but copying, dump(), comparison and our own schema walkers recurse
// once per level, so a 100,000-deep document parses fine and then overflows the stack of whichever
// thread touches it. parse_json() therefore refuses a document nested deeper than kMaxJsonDepth before
// building anything; a parser that does not go through it (a SAX pass, a hand-written scanner) calls
// check_json_depth() first. Callers parsing into ordered_json also bound the members of objects
// (JsonShapeLimits), whose parse is quadratic in them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "gantry/core/status.h"

namespace gantry {

// The deepest nesting of arrays and objects a JSON document from outside may have. Far above legitimate
// use: a KServe request's tensor "data" nests to the tensor's rank (ONNX models rarely exceed 8) under 3
// levels; a JSON schema nests 2 levels per object level ("properties", then the property), so OpenAI's
// limit of 10 object levels is about 24 levels with the request around it.
inline constexpr size_t kMaxJsonDepth = 64;

// The member `key` of `obj` when it is present and not null, else nullptr: how every request codec reads an
// optional field (JSON null means "not given", as OpenAI's, Anthropic's and Ollama's servers treat it).
inline const nlohmann::json* json_field(const nlohmann::json& obj, std::string_view key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// `j` as compact JSON text, invalid UTF-8 replaced by U+FFFD instead of throwing (generated text may end
// inside a character).
inline std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Bounds on a document's shape, checked by one linear pass before it is parsed.
struct JsonShapeLimits {
  size_t max_depth = kMaxJsonDepth;
  // Members of one object, and of all objects together. For ordered_json: it keeps an object's members in
  // a vector and looks each new key up linearly, so parsing an object of n members costs n^2/2 key
  // comparisons (20,000 keys: half a second). Unbounded by default (nlohmann::json's std::map is fine).
  size_t max_object_members = SIZE_MAX;
  size_t max_members = SIZE_MAX;
};

// InvalidArgument "<origin>: JSON nests deeper than 64 levels ..." when `text` opens more than
// `max_depth` arrays/objects inside one another (or "<origin>: a JSON object has more than N members",
// "...: JSON objects have more than N members in all"); OK otherwise. Brackets, colons inside strings
// (escapes included) do not count. Text that is not JSON may pass: the parser then says what is wrong
// with it. One linear pass; no allocation unless members are bounded.
Status check_json_shape(std::string_view text, std::string_view origin, const JsonShapeLimits& limits = {});

// check_json_shape with the default limits: only the depth.
inline Status check_json_depth(std::string_view text, std::string_view origin) {
  return check_json_shape(text, origin);
}

// Parses `text`; `origin` names the file or stream in the error ("<origin>: not valid JSON: ...").
// A document beyond `limits` (by default: deeper than kMaxJsonDepth) is refused before anything is built.
template <typename Json = nlohmann::json>
Result<Json> parse_json(std::string_view text, std::string_view origin, const JsonShapeLimits& limits = {}) {
  GANTRY_RETURN_IF_ERROR(check_json_shape(text, origin, limits));
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string(origin) + ": not valid JSON: " + e.what());
  }
}

namespace json_detail {
// nlohmann's DOM builder, with the keys of every open object checked on the way in (parse_json_unique_keys).
template <typename Json>
class UniqueKeysSax {
 public:
  explicit UniqueKeysSax(Json& out) : dom_(out, /*allow_exceptions=*/false) {}
  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(typename Json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(typename Json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(typename Json::number_float_t v, const typename Json::string_t& s) {
    return dom_.number_float(v, s);
  }
  bool string(typename Json::string_t& v) { return dom_.string(v); }
  bool binary(typename Json::binary_t& v) { return dom_.binary(v); }
  bool start_object(std::size_t n) {
    open_.emplace_back();
    return dom_.start_object(n);
  }
  bool key(typename Json::string_t& k) {
    if (!open_.back().insert(k).second) {
      duplicate_ = k;
      return false;
    }
    return dom_.key(k);
  }
  bool end_object() {
    open_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) { return dom_.start_array(n); }
  bool end_array() { return dom_.end_array(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    error_ = e.what();
    return false;
  }
  std::optional<std::string> duplicate_, error_;

 private:
  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  std::vector<std::unordered_set<typename Json::string_t>> open_;
};
}  // namespace json_detail

// Like parse_json, for documents where a repeated key is an attacker's trick rather than a typo: a key that
// appears twice in one object is an InvalidArgument naming it ("<origin>: duplicate key 'name'") instead of
// the last one silently winning. Linear time: one hash set per open object, and nlohmann's SAX DOM builder
// (its callback parser rescans an object's members each time one of them ends: 20,000 members took 1.35 s,
// 23 s under ASan). Depth as parse_json.
template <typename Json = nlohmann::json>
Result<Json> parse_json_unique_keys(std::string_view text, std::string_view origin) {
  GANTRY_RETURN_IF_ERROR(check_json_depth(text, origin));
  Json out;
  json_detail::UniqueKeysSax<Json> sax(out);
  bool ok = false;
  try {
    ok = Json::sax_parse(text, &sax);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string(origin) + ": not valid JSON: " + e.what());
  }
  if (sax.duplicate_) {
    return InvalidArgument(std::string(origin) + ": duplicate key '" + *sax.duplicate_ +
                           "' (a key may appear only once in an object)");
  }
  if (!ok || sax.error_) {
    return InvalidArgument(std::string(origin) + ": not valid JSON: " + sax.error_.value_or("parse failed"));
  }
  return out;
}

}  // namespace gantry
