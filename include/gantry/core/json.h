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
//
// Memory: a DOM costs far more than its text ("{}," is 3 bytes of text and ~90 bytes of nodes; 60 MiB of
// "[{},{},...]" in an ignored request field took 2.2 GiB). Documents from clients are therefore parsed
// under a budget of DOM bytes (JsonShapeLimits::max_dom_bytes, json_dom_budget(): 4x the text plus
// 8 MiB), counted while the DOM is built, so parsing stops before the memory is spent.
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

// The DOM bytes a document from a client may take: kJsonDomBytesPerTextByte times its text plus
// kJsonDomAllowance (what small, structure-heavy bodies such as tool schemas or many short messages need:
// their nodes cost 5-12x their text). Long prompts cost about 1x, token arrays 3-4x.
inline constexpr size_t kJsonDomBytesPerTextByte = 4;
inline constexpr size_t kJsonDomAllowance = size_t{8} << 20;
constexpr size_t json_dom_budget(size_t text_bytes) {
  return text_bytes > (SIZE_MAX - kJsonDomAllowance) / kJsonDomBytesPerTextByte
             ? SIZE_MAX
             : text_bytes * kJsonDomBytesPerTextByte + kJsonDomAllowance;
}

// Bounds on a document's shape, checked by one linear pass before it is parsed (max_dom_bytes: while it
// is parsed).
struct JsonShapeLimits {
  size_t max_depth = kMaxJsonDepth;
  // Members of one object, and of all objects together. For ordered_json: it keeps an object's members in
  // a vector and looks each new key up linearly, so parsing an object of n members costs n^2/2 key
  // comparisons (20,000 keys: half a second). Unbounded by default (nlohmann::json's std::map is fine).
  size_t max_object_members = SIZE_MAX;
  size_t max_members = SIZE_MAX;
  // The memory the DOM may take, as json_detail::DomCost estimates it (the allocations of values, strings,
  // containers and members with glibc's per-block overhead, array and vector growth included), counted
  // during the build: parsing stops as soon as it is over, the partial DOM is freed, and the parse fails
  // with InvalidArgument "<origin>: the JSON would take more than N bytes of memory, over the limit of M
  // (...)". Unbounded by default (files Gantry reads); documents from clients use client_json_limits().
  size_t max_dom_bytes = SIZE_MAX;
};

// The limits of a document from a client (a request body, a tool call's arguments): the default shape
// and a DOM budget of json_dom_budget(text.size()).
inline JsonShapeLimits client_json_limits(std::string_view text) {
  JsonShapeLimits limits;
  limits.max_dom_bytes = json_dom_budget(text.size());
  return limits;
}

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

namespace json_detail {

// What the parts of a DOM of type Json cost in memory, on libstdc++ and glibc (x86-64 and aarch64): a
// block of n bytes from malloc takes max(32, n + 8 rounded up to 16). nlohmann::json keeps a string, an
// array or an object behind a pointer to its own block; an array is a std::vector of 16-byte values; an
// object is a std::map (a node per member) or, for ordered_json, a vector of members.
template <typename Json>
struct DomCost {
  static constexpr size_t block(size_t n) { return n + 8 <= 32 ? 32 : (n + 8 + 15) / 16 * 16; }
  static constexpr bool kMapObjects = requires { typename Json::object_t::node_type; };
  using Member = typename Json::object_t::value_type;  // pair<const string_t, Json>
  // A string's own characters beyond the small-string buffer (15 characters in libstdc++).
  static constexpr size_t chars(size_t len) { return len > 15 ? block(len + 1) : 0; }
  static constexpr size_t string(size_t len) { return block(sizeof(typename Json::string_t)) + chars(len); }
  static constexpr size_t array() { return block(sizeof(typename Json::array_t)); }
  static constexpr size_t object() { return block(sizeof(typename Json::object_t)); }
  // A std::map node: the red-black tree's 4 words, then the member.
  static constexpr size_t map_member(size_t key_len) { return block(32 + sizeof(Member)) + chars(key_len); }
  // A hash set of an open object's keys (parse_json_unique_keys): a node (next pointer, key, hash) and
  // about two bucket pointers per key; freed when the object ends.
  static constexpr size_t key_set_entry(size_t key_len) {
    return block(sizeof(void*) + sizeof(typename Json::string_t) + sizeof(size_t)) + 2 * sizeof(void*) +
           chars(key_len);
  }
};

// nlohmann's DOM builder, counting what the DOM costs as it grows (JsonShapeLimits::max_dom_bytes) and,
// when asked, checking the keys of every open object on the way in (parse_json_unique_keys).
template <typename Json>
class BuildingSax {
 public:
  BuildingSax(Json& out, bool unique_keys, size_t max_dom_bytes)
      : dom_(out, /*allow_exceptions=*/false), unique_keys_(unique_keys), max_(max_dom_bytes) {}
  bool null() { return element(0) && dom_.null(); }
  bool boolean(bool v) { return element(0) && dom_.boolean(v); }
  bool number_integer(typename Json::number_integer_t v) { return element(0) && dom_.number_integer(v); }
  bool number_unsigned(typename Json::number_unsigned_t v) { return element(0) && dom_.number_unsigned(v); }
  bool number_float(typename Json::number_float_t v, const typename Json::string_t& s) {
    return element(0) && dom_.number_float(v, s);
  }
  bool string(typename Json::string_t& v) { return element(Cost::string(v.size())) && dom_.string(v); }
  bool binary(typename Json::binary_t& v) { return element(Cost::string(v.size())) && dom_.binary(v); }
  bool start_object(std::size_t n) {
    if (!element(Cost::object())) return false;
    open_.emplace_back().is_array = false;
    if (unique_keys_) keys_.emplace_back();
    return dom_.start_object(n);
  }
  bool key(typename Json::string_t& k) {
    Open& o = open_.back();
    if (unique_keys_) {
      if (!spend(Cost::key_set_entry(k.size()))) return false;
      o.key_bytes += Cost::key_set_entry(k.size());
      if (!keys_.back().insert(k).second) {
        duplicate_ = k;
        return false;
      }
    }
    if constexpr (Cost::kMapObjects) {
      if (!spend(Cost::map_member(k.size()))) return false;
    } else {
      if (!grow(o, sizeof(typename Cost::Member)) || !spend(Cost::chars(k.size()))) return false;
    }
    return dom_.key(k);
  }
  bool end_object() {
    used_ -= open_.back().key_bytes;  // the key set is freed; the members stay
    open_.pop_back();
    if (unique_keys_) keys_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    if (!element(Cost::array())) return false;
    open_.emplace_back().is_array = true;
    return dom_.start_array(n);
  }
  bool end_array() {
    open_.pop_back();
    return dom_.end_array();
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    error_ = e.what();
    return false;
  }
  size_t used() const { return used_; }
  bool over() const { return over_; }
  std::optional<std::string> duplicate_, error_;

 private:
  using Cost = DomCost<Json>;
  struct Open {
    bool is_array = false;
    size_t size = 0, capacity = 0;  // elements (or ordered_json members) and the vector's capacity
    size_t key_bytes = 0;           // what the key set of the object costs (unique_keys)
  };
  bool spend(size_t n) {
    used_ += n;
    if (used_ <= max_) return true;
    over_ = true;
    return false;
  }
  // One more entry of `size` bytes in o's vector: when full, it moves to a block twice as large (both
  // are held while it moves).
  bool grow(Open& o, size_t size) {
    if (o.size++ < o.capacity) return true;
    const size_t old_block = o.capacity ? Cost::block(o.capacity * size) : 0;
    o.capacity = o.capacity ? 2 * o.capacity : 1;
    if (!spend(Cost::block(o.capacity * size))) return false;
    used_ -= old_block;
    return true;
  }
  // A value costing `cost` beyond its 16 bytes, which an array's vector holds (an object's member node
  // holds them, counted by key(); the root's are on the caller's stack).
  bool element(size_t cost) {
    if (!open_.empty() && open_.back().is_array && !grow(open_.back(), sizeof(Json))) return false;
    return spend(cost);
  }

  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  const bool unique_keys_;
  const size_t max_;
  size_t used_ = 0;
  bool over_ = false;
  std::vector<Open> open_;
  std::vector<std::unordered_set<typename Json::string_t>> keys_;
};

// Frees `j` without nlohmann's destructor, which first moves a container's elements into a new vector
// of their own (a transient copy of the largest array: +46 MiB, a third more than the DOM, for a
// partial DOM of 2.9 million elements): the last element of the innermost container is taken out, one at
// a time, so nothing is held but the path to it (at most the document's depth).
template <typename Json>
void teardown(Json& j) {
  auto has_children = [](const Json& v) { return (v.is_array() || v.is_object()) && !v.empty(); };
  if (!has_children(j)) return;
  std::vector<Json> path;
  path.push_back(std::move(j));
  while (!path.empty()) {
    Json& top = path.back();
    if (top.empty()) {
      path.pop_back();
      continue;
    }
    Json child;
    if (top.is_array()) {
      auto& a = top.template get_ref<typename Json::array_t&>();
      child = std::move(a.back());
      a.pop_back();
    } else {
      auto& o = top.template get_ref<typename Json::object_t&>();
      auto last = std::prev(o.end());
      child = std::move(last->second);
      o.erase(last);
    }
    if (has_children(child)) path.push_back(std::move(child));
  }
}

// The error of a parse stopped over its budget (where it stopped says nothing of what the whole DOM
// would have taken, so only the limit is named).
Status dom_budget_error(std::string_view origin, size_t max_dom_bytes, size_t text_bytes);

template <typename Json>
Result<Json> parse(std::string_view text, std::string_view origin, const JsonShapeLimits& limits,
                   bool unique_keys) {
  GANTRY_RETURN_IF_ERROR(check_json_shape(text, origin, limits));
  bool over = false;
  std::optional<std::string> duplicate, error;
  {
    Json out;
    BuildingSax<Json> sax(out, unique_keys, limits.max_dom_bytes);
    bool ok = false;
    try {
      ok = Json::sax_parse(text, &sax);
    } catch (const nlohmann::json::exception& e) {
      return InvalidArgument(std::string(origin) + ": not valid JSON: " + e.what());
    }
    if (ok && !sax.error_ && !sax.duplicate_) return out;
    over = sax.over();
    duplicate = std::move(sax.duplicate_);
    error = std::move(sax.error_);
    teardown(out);  // the partial DOM, freed without a transient copy of its largest array
  }
  if (over) return dom_budget_error(origin, limits.max_dom_bytes, text.size());
  if (duplicate) {
    return InvalidArgument(std::string(origin) + ": duplicate key '" + *duplicate +
                           "' (a key may appear only once in an object)");
  }
  return InvalidArgument(std::string(origin) + ": not valid JSON: " + error.value_or("parse failed"));
}
}  // namespace json_detail

// Parses `text`; `origin` names the file or stream in the error ("<origin>: not valid JSON: ...").
// A document beyond `limits` (by default: deeper than kMaxJsonDepth) is refused before anything is built;
// one whose DOM would take more than limits.max_dom_bytes, as soon as its DOM gets there.
template <typename Json = nlohmann::json>
Result<Json> parse_json(std::string_view text, std::string_view origin, const JsonShapeLimits& limits = {}) {
  return json_detail::parse<Json>(text, origin, limits, /*unique_keys=*/false);
}

// Like parse_json, for documents where a repeated key is an attacker's trick rather than a typo: a key that
// appears twice in one object is an InvalidArgument naming it ("<origin>: duplicate key 'name'") instead of
// the last one silently winning. Linear time: one hash set per open object, and nlohmann's SAX DOM builder
// (its callback parser rescans an object's members each time one of them ends: 20,000 members took 1.35 s,
// 23 s under ASan). Depth and memory as parse_json.
template <typename Json = nlohmann::json>
Result<Json> parse_json_unique_keys(std::string_view text, std::string_view origin,
                                    const JsonShapeLimits& limits = {}) {
  return json_detail::parse<Json>(text, origin, limits, /*unique_keys=*/true);
}

}  // namespace gantry
