#include "backend/llama/schema_bounds.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/backend/llama/json_grammar.h"
#include "gantry/core/json.h"

namespace gantry::llama {

namespace {

using Json = nlohmann::ordered_json;

// The JSON types a subschema's values may have, as bits.
enum : unsigned {
  kTNull = 1,
  kTBoolean = 2,
  kTInteger = 4,
  kTNumber = 8,  // a number that is not an integer
  kTString = 16,
  kTArray = 32,
  kTObject = 64,
  kTAll = 127,
};
constexpr unsigned kTNumeric = kTInteger | kTNumber;

unsigned value_type(const Json& v) {
  if (v.is_null()) return kTNull;
  if (v.is_boolean()) return kTBoolean;
  if (v.is_number_integer()) return kTInteger;
  if (v.is_number()) return kTNumber;
  if (v.is_string()) return kTString;
  if (v.is_array()) return kTArray;
  return kTObject;
}

// The values a "type" name admits (0: not a type name).
unsigned type_values(std::string_view t) {
  if (t == "null") return kTNull;
  if (t == "boolean") return kTBoolean;
  if (t == "integer") return kTInteger;
  if (t == "number") return kTNumeric;
  if (t == "string") return kTString;
  if (t == "array") return kTArray;
  if (t == "object") return kTObject;
  return 0;
}

// What the grammar of a subschema generates, as llama.cpp's common_chat_schema_from_json decides it.
enum class Kind { kAny, kValues, kObject, kArray, kTuple, kString, kInteger, kNumber, kBoolean, kNull };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kAny:
      return "any";
    case Kind::kValues:
      return "enum or const";
    case Kind::kObject:
      return "object";
    case Kind::kArray:
    case Kind::kTuple:
      return "array";
    case Kind::kString:
      return "string";
    case Kind::kInteger:
      return "integer";
    case Kind::kNumber:
      return "number";
    case Kind::kBoolean:
      return "boolean";
    case Kind::kNull:
      return "null";
  }
  return "?";
}

// Keywords for any value.
const std::set<std::string, std::less<>> kGeneral = {"type", "enum",  "const",      "anyOf",
                                                     "$ref", "$defs", "definitions"};
const std::set<std::string, std::less<>> kAnnotations = {"title",      "description", "default",   "examples",
                                                         "deprecated", "readOnly",    "writeOnly", "$schema",
                                                         "$id",        "$comment"};
// Keywords that constrain values of some types only (a subschema generating none of those may have them).
const std::map<std::string, unsigned, std::less<>> kTyped = {{"properties", kTObject},
                                                             {"required", kTObject},
                                                             {"additionalProperties", kTObject},
                                                             {"patternProperties", kTObject},
                                                             {"propertyNames", kTObject},
                                                             {"minProperties", kTObject},
                                                             {"maxProperties", kTObject},
                                                             {"dependentRequired", kTObject},
                                                             {"dependentSchemas", kTObject},
                                                             {"dependencies", kTObject},
                                                             {"unevaluatedProperties", kTObject},
                                                             {"items", kTArray},
                                                             {"prefixItems", kTArray},
                                                             {"minItems", kTArray},
                                                             {"maxItems", kTArray},
                                                             {"additionalItems", kTArray},
                                                             {"uniqueItems", kTArray},
                                                             {"contains", kTArray},
                                                             {"minContains", kTArray},
                                                             {"maxContains", kTArray},
                                                             {"unevaluatedItems", kTArray},
                                                             {"minLength", kTString},
                                                             {"maxLength", kTString},
                                                             {"format", kTString},
                                                             {"pattern", kTString},
                                                             {"contentEncoding", kTString},
                                                             {"contentMediaType", kTString},
                                                             {"contentSchema", kTString},
                                                             {"minimum", kTNumeric},
                                                             {"maximum", kTNumeric},
                                                             {"exclusiveMinimum", kTNumeric},
                                                             {"exclusiveMaximum", kTNumeric},
                                                             {"multipleOf", kTNumeric}};

constexpr std::string_view kSupported =
    "supported: type, enum, const, anyOf, $ref, $defs; objects: properties, required, additionalProperties "
    "true or false; arrays: items, prefixItems, minItems, maxItems; strings: minLength, maxLength, format "
    "date, time, date-time or uuid; integers: minimum, maximum, exclusiveMinimum, exclusiveMaximum";

bool known_format(const Json& f) {
  if (!f.is_string()) return false;
  const std::string& s = f.get_ref<const std::string&>();
  return s == "date" || s == "time" || s == "date-time" || s == "uuid" ||
         (s.size() == 5 && s.starts_with("uuid") && s[4] >= '1' && s[4] <= '5');
}

// Where a subschema sits: a chain of JSON pointer segments on the recursion's stack. The pointer text
// is built only for an error message (building it at every node would cost depth x key length each).
struct Path {
  const Path* parent = nullptr;  // nullptr: the schema root
  std::string_view key;          // a member name, or
  size_t index = SIZE_MAX;       // an array index
  Path child(std::string_view k) const { return Path{this, k, SIZE_MAX}; }
  Path child(size_t i) const { return Path{this, {}, i}; }
};

// The JSON pointer of `p` ("" for the root), cut short when very long (keys may be any size).
std::string pointer(const Path& p) {
  constexpr size_t kMaxChars = 200;
  std::vector<const Path*> chain;
  for (const Path* q = &p; q->parent; q = q->parent) chain.push_back(q);
  std::string out;
  for (auto it = chain.rbegin(); it != chain.rend() && out.size() <= kMaxChars; ++it) {
    out += '/';
    if ((*it)->index != SIZE_MAX) {
      out += std::to_string((*it)->index);
      continue;
    }
    for (char c : (*it)->key.substr(0, kMaxChars + 1)) {
      if (c == '~')
        out += "~0";
      else if (c == '/')
        out += "~1";
      else
        out += c;
    }
  }
  if (out.size() > kMaxChars) {
    out.resize(kMaxChars);
    out += "...";
  }
  return out;
}

std::string where(const Path& path) { return path.parent ? "'" + pointer(path) + "'" : "the schema root"; }

std::string cut(std::string_view s, size_t n = 64) {
  return s.size() > n ? std::string(s.substr(0, n)) + "..." : std::string(s);
}

std::string json_text(const Json& v) { return v.dump(-1, ' ', false, Json::error_handler_t::replace); }

Status too_large(const std::string& what, size_t limit) {
  return InvalidArgument("the JSON schema is too large: " + what + " (at most " + std::to_string(limit) +
                         "; a larger schema would make its grammar slow to build and to apply)");
}

Status unsupported(std::string_view keyword, const Path& path, const std::string& context = "") {
  return InvalidArgument("unsupported JSON schema keyword '" + cut(keyword) + "' at " + where(path) +
                         context + " (" + std::string(kSupported) + ")");
}

Status combination_error(std::string_view a, std::string_view b, const Path& path) {
  return InvalidArgument("'" + std::string(a) + "' together with '" + cut(b) + "' at " + where(path) +
                         " is not supported (llama.cpp would apply only the '" + std::string(a) + "')");
}

// Objects nest at most kMaxJsonDepth deep and have at most kMaxSchemaNodes members each and
// kMaxSchemaMembers in all (what parse_json checks of a schema's text, for one given already parsed).
class ShapeCheck {
 public:
  Status check(const Json& j, size_t depth) {
    if (!j.is_object() && !j.is_array()) return Status::Ok();
    if (depth > kMaxJsonDepth) {
      return InvalidArgument("the JSON schema: JSON nests deeper than " + std::to_string(kMaxJsonDepth) +
                             " levels (arrays and objects inside one another)");
    }
    if (j.is_object()) {
      if (j.size() > kMaxSchemaNodes) {
        return InvalidArgument("the JSON schema: a JSON object has more than " +
                               std::to_string(kMaxSchemaNodes) + " members");
      }
      members_ += j.size();
      if (members_ > kMaxSchemaMembers) {
        return InvalidArgument("the JSON schema: JSON objects have more than " +
                               std::to_string(kMaxSchemaMembers) + " members in all");
      }
    }
    for (const auto& v : j) GANTRY_RETURN_IF_ERROR(check(v, depth + 1));
    return Status::Ok();
  }

 private:
  size_t members_ = 0;
};

// Walks the schema as llama.cpp's common_chat_schema_from_json and its converter will: the same keyword
// decides what a subschema generates, type arrays expand to one alternative per type, and each $ref'd
// definition is built once. `name` is the length of the grammar rule name llama.cpp gives a subschema.
class Checker {
 public:
  explicit Checker(Json& root) : root_(root) {}

  Result<size_t> visit(Json& s, const Path& path, size_t name) {
    GANTRY_RETURN_IF_ERROR(count_node());
    if (name > kMaxSchemaNameBytes) {
      return too_large("the property names on the way to " + where(path) + " take more than " +
                           std::to_string(kMaxSchemaNameBytes) +
                           " bytes (llama.cpp names a grammar rule after them)",
                       kMaxSchemaNameBytes);
    }
    if (s.is_boolean()) {
      if (!s.get<bool>())
        return InvalidArgument("the JSON schema 'false' at " + where(path) + " accepts no value");
      s = Json::object();  // llama.cpp takes objects only; {} means the same
      return size_t{1};
    }
    if (!s.is_object()) {
      return InvalidArgument("a JSON schema must be an object or a boolean, got " +
                             std::string(s.type_name()) + " at " + where(path));
    }
    for (const auto& [k, v] : s.items()) {
      if (!kGeneral.contains(k) && !kAnnotations.contains(k) && !kTyped.contains(k))
        return unsupported(k, path);
    }
    // What llama.cpp applies first, alone: the rest must be annotations.
    for (const char* only : {"$ref", "anyOf"}) {
      if (!s.contains(only)) continue;
      for (const auto& [k, v] : s.items()) {
        if (k != only && !kAnnotations.contains(k) && k != "$defs" && k != "definitions")
          return combination_error(only, k, path);
      }
    }
    if (s.contains("$ref")) return ref(s.at("$ref"), path.child("$ref"));
    if (s.contains("anyOf")) {
      Json& a = s.at("anyOf");
      if (!a.is_array() || a.empty()) {
        return InvalidArgument("'anyOf' at " + where(path) + " must be a non-empty array");
      }
      const Path any_of = path.child("anyOf");
      size_t width = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        GANTRY_ASSIGN_OR_RETURN(size_t w, visit(a[i], any_of.child(i), name + 1 + kIndexName));
        width += w;
        GANTRY_RETURN_IF_ERROR(check_width(width, "'anyOf'", path));
      }
      return width;
    }
    size_t width = 1;
    auto type = s.find("type");
    if (type != s.end()) {
      unsigned allowed = 0;
      std::vector<std::string> types;
      if (type->is_string()) {
        types.push_back(type->get<std::string>());
      } else if (type->is_array() && !type->empty()) {
        for (const auto& t : *type) {
          if (!t.is_string()) return InvalidArgument("'type' at " + where(path) + " lists a non-string");
          types.push_back(t.get<std::string>());
        }
      } else {
        return InvalidArgument("'type' at " + where(path) +
                               " must be a type name or a non-empty array of them");
      }
      std::set<std::string_view> seen;
      for (const auto& t : types) {
        const unsigned v = type_values(t);
        if (!v) {
          return InvalidArgument("unknown type '" + cut(t) + "' at " + where(path) +
                                 " (object, array, string, number, integer, boolean, null)");
        }
        if (!seen.insert(t).second)
          return InvalidArgument("'type' at " + where(path) + " lists '" + t + "' twice");
        allowed |= v;
      }
      // llama.cpp applies a const or an enum in place of the type.
      for (const char* k : {"const", "enum"}) {
        auto it = s.find(k);
        if (it == s.end() || (k == std::string_view("enum") && !it->is_array())) continue;
        const Json one = Json::array({*it});
        for (const auto& v : k == std::string_view("const") ? one : *it) {
          if (!(value_type(v) & allowed)) {
            return InvalidArgument("'" + std::string(k) + "' at " + where(path) + " has " +
                                   cut(json_text(v)) + ", which is not of its 'type'");
          }
        }
      }
      if (type->is_array()) {
        width = 0;
        for (size_t i = 0; i < types.size(); ++i) {
          GANTRY_RETURN_IF_ERROR(count_node());
          GANTRY_ASSIGN_OR_RETURN(size_t w, typed(s, types[i], path, name + 1 + kIndexName));
          width += w;
        }
        GANTRY_RETURN_IF_ERROR(check_width(width, "'type'", path));
      } else {
        GANTRY_ASSIGN_OR_RETURN(width, typed(s, types[0], path, name));
      }
    } else {
      GANTRY_ASSIGN_OR_RETURN(width, typed(s, "", path, name));
    }
    // Allowed anyway (and without it llama.cpp generates no extra keys).
    if (auto it = s.find("additionalProperties"); it != s.end() && *it == true) s.erase(it);
    return width;
  }

  Status check_grammar_estimate() const {
    if (grammar_bytes_ <= kMaxGrammarBytes) return Status::Ok();
    return too_large("its grammar would take at least " + std::to_string(grammar_bytes_) +
                         " bytes (its enum values, consts and property names alone)",
                     kMaxGrammarBytes);
  }

 private:
  // Bytes a rule name grows by for an alternative, a tuple item or an array's items ("-12", "-item").
  static constexpr size_t kIndexName = 12;
  // What renaming one rule costs llama.cpp's converter beyond its name's bytes (kMaxSchemaOptionalWork).
  static constexpr size_t kOptionalWorkPerRule = 32;

  Status count_node() {
    if (++nodes_ <= kMaxSchemaNodes) return Status::Ok();
    return too_large("more than " + std::to_string(kMaxSchemaNodes) +
                         " subschemas (each property, items, tuple item, anyOf branch, type-array entry and "
                         "$ref'd definition counts one)",
                     kMaxSchemaNodes);
  }

  // Alternatives at one point cost every decode step the sequence spends there.
  static Status check_width(size_t width, const char* what, const Path& path) {
    if (width <= kMaxSchemaAlternatives) return Status::Ok();
    return too_large(std::string(what) + " at " + where(path) + " offers more than " +
                         std::to_string(kMaxSchemaAlternatives) + " alternatives at one point",
                     kMaxSchemaAlternatives);
  }

  Status add_grammar_bytes(size_t n) {
    grammar_bytes_ += n;
    return check_grammar_estimate();
  }

  Result<size_t> ref(const Json& r, const Path& path) {
    if (!r.is_string()) return InvalidArgument("'$ref' at " + where(path) + " must be a string");
    const std::string& target = r.get_ref<const std::string&>();
    const auto refused = [&] {
      return InvalidArgument("'$ref' \"" + cut(target, 200) + "\" at " + where(path) +
                             " does not name an entry of the root's $defs or definitions "
                             "(only \"#/$defs/<name>\" and \"#/definitions/<name>\" are supported)");
    };
    std::string_view section;
    for (std::string_view s : {"$defs", "definitions"}) {
      if (target.starts_with("#/" + std::string(s) + "/")) section = s;
    }
    if (section.empty()) return refused();
    const std::string name = target.substr(section.size() + 3);
    // llama.cpp splits the pointer at each '/' (and does not unescape ~0 and ~1).
    if (name.find('/') != std::string::npos || !root_.is_object()) return refused();
    auto defs = root_.find(section);
    if (defs == root_.end() || !defs->is_object()) return refused();
    auto def = defs->find(name);
    if (def == defs->end()) return refused();
    auto [it, first] = refs_.emplace(target, 1);  // in progress: a recursion back to it offers one
    if (!first) return it->second;
    // llama.cpp's rule: "ref" and the pointer, its other characters as '-'.
    const Path root{};
    const Path defs_path = root.child(section);
    GANTRY_ASSIGN_OR_RETURN(size_t width, visit(*def, defs_path.child(name), 3 + target.size()));
    refs_[target] = width;
    return width;
  }

  // Refuses a keyword llama.cpp would not apply to the values `kind` generates.
  static Status check_applied(const Json& s, Kind kind, unsigned values, const Path& path) {
    for (const auto& [k, v] : s.items()) {
      auto typed = kTyped.find(k);
      if (typed == kTyped.end() || !(typed->second & values)) continue;
      // Keywords that constrain nothing.
      if ((k == "additionalProperties" && v == true) || (k == "required" && v.is_array() && v.empty()))
        continue;
      bool applied = false;
      switch (kind) {
        case Kind::kObject:
          applied = k == "properties" || k == "required" || k == "additionalProperties";
          break;
        case Kind::kArray:
        case Kind::kTuple:
          applied = k == "items" || k == "prefixItems" || k == "minItems" || k == "maxItems";
          break;
        case Kind::kString:
          applied = k == "format" || ((k == "minLength" || k == "maxLength") && !s.contains("format"));
          break;
        case Kind::kInteger:
          applied = k == "minimum" || k == "maximum" || k == "exclusiveMinimum" || k == "exclusiveMaximum";
          break;
        default:
          break;
      }
      if (!applied) {
        if (kind == Kind::kString && (k == "minLength" || k == "maxLength")) {
          return combination_error("format", k, path);
        }
        return unsupported(k, path, std::string(" for ") + kind_name(kind) + " values");
      }
    }
    return Status::Ok();
  }

  // A repetition count (minLength, minItems, ...): nullopt when absent.
  static Result<std::optional<int64_t>> count(const Json& s, const char* k, const char* what,
                                              const Path& path) {
    auto it = s.find(k);
    if (it == s.end()) return std::optional<int64_t>();
    const bool ok = it->is_number_unsigned() ? it->get<uint64_t>() <= uint64_t{kMaxSchemaRepetition}
                    : it->is_number_integer()
                        ? it->get<int64_t>() >= 0 && it->get<int64_t>() <= kMaxSchemaRepetition
                        : false;
    if (!ok) {
      return InvalidArgument(std::string("'") + k + "' at " + where(path) + " must be an integer in 0.." +
                             std::to_string(kMaxSchemaRepetition) +
                             " (the most llama.cpp's grammar can repeat " + what + ")");
    }
    return std::optional<int64_t>(it->get<int64_t>());
  }

  static Status check_counts(const Json& s, const char* lo_key, const char* hi_key, const char* what,
                             const Path& path) {
    GANTRY_ASSIGN_OR_RETURN(auto lo, count(s, lo_key, what, path));
    GANTRY_ASSIGN_OR_RETURN(auto hi, count(s, hi_key, what, path));
    if (lo && hi && *hi < *lo) {
      return InvalidArgument(std::string("'") + hi_key + "' is below '" + lo_key + "' at " + where(path));
    }
    return Status::Ok();
  }

  // An integer bound, as llama.cpp rounds it: towards the integers it admits.
  static Result<std::optional<double>> bound(const Json& s, const char* k, const Path& path) {
    auto it = s.find(k);
    if (it == s.end()) return std::optional<double>();
    constexpr double kMax = 1e15;  // llama.cpp's integer ranges have at most 16 digits
    if (!it->is_number() || !(std::fabs(it->get<double>()) <= kMax)) {
      return InvalidArgument(std::string("'") + k + "' at " + where(path) +
                             " must be a number between -1e15 and 1e15");
    }
    return std::optional<double>(it->get<double>());
  }

  static Status check_integer(const Json& s, const Path& path) {
    for (const char* k : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
      GANTRY_RETURN_IF_ERROR(bound(s, k, path).status());
    }
    // llama.cpp reads the exclusive bound only without the inclusive one.
    if (s.contains("minimum") && s.contains("exclusiveMinimum"))
      return combination_error("minimum", "exclusiveMinimum", path);
    if (s.contains("maximum") && s.contains("exclusiveMaximum"))
      return combination_error("maximum", "exclusiveMaximum", path);
    std::optional<double> lo, hi;
    if (auto m = *bound(s, "minimum", path)) lo = std::ceil(*m);
    if (auto m = *bound(s, "exclusiveMinimum", path)) lo = std::floor(*m) + 1;
    if (auto m = *bound(s, "maximum", path)) hi = std::floor(*m);
    if (auto m = *bound(s, "exclusiveMaximum", path)) hi = std::ceil(*m) - 1;
    if (lo && hi && *hi < *lo) {
      return InvalidArgument("no integer is within the minimum and maximum at " + where(path));
    }
    return Status::Ok();
  }

  // The subschema `s` with its type (or "" for none) as one entry of a type array or its type.
  Result<size_t> typed(Json& s, const std::string& type, const Path& path, size_t name) {
    // As llama.cpp's builder: const, then enum, then the type, then (without one) the keywords.
    if (s.contains("const")) {
      GANTRY_RETURN_IF_ERROR(check_applied(s, Kind::kValues, value_type(s.at("const")), path));
      GANTRY_RETURN_IF_ERROR(add_grammar_bytes(json_text(s.at("const")).size()));
      return size_t{1};
    }
    if (s.contains("enum")) {
      const Json& e = s.at("enum");
      if (!e.is_array() || e.empty())
        return InvalidArgument("'enum' at " + where(path) + " must be a non-empty array");
      unsigned values = 0;
      for (const auto& v : e) values |= value_type(v);
      GANTRY_RETURN_IF_ERROR(check_applied(s, Kind::kValues, values, path));
      enum_values_ += e.size();
      if (enum_values_ > kMaxSchemaEnumValues) {
        return too_large("more than " + std::to_string(kMaxSchemaEnumValues) + " enum values in all",
                         kMaxSchemaEnumValues);
      }
      GANTRY_RETURN_IF_ERROR(check_width(e.size(), "'enum'", path));
      for (const auto& v : e) GANTRY_RETURN_IF_ERROR(add_grammar_bytes(json_text(v).size() + 3));
      return e.size();
    }
    Kind kind = Kind::kAny;
    if (type.empty()) {
      auto ap = s.find("additionalProperties");
      if (s.contains("properties") || (ap != s.end() && *ap != true)) {
        kind = Kind::kObject;
      } else if (s.contains("items") || s.contains("prefixItems")) {
        kind = Kind::kArray;
      } else if (s.contains("minLength") || s.contains("maxLength") || s.contains("format")) {
        kind = Kind::kString;  // llama.cpp: only for a format it knows (else any value: refused below)
        if (!s.contains("minLength") && !s.contains("maxLength") && !known_format(s.at("format")))
          kind = Kind::kAny;
      }
    } else if (type == "object") {
      kind = Kind::kObject;
    } else if (type == "array") {
      kind = Kind::kArray;
    } else if (type == "string") {
      kind = Kind::kString;
    } else if (type == "integer") {
      kind = Kind::kInteger;
    } else if (type == "number") {
      kind = Kind::kNumber;
    } else if (type == "boolean") {
      kind = Kind::kBoolean;
    } else {
      kind = Kind::kNull;
    }
    if (kind == Kind::kArray) {
      auto items = s.find("items");
      if (items != s.end() && s.contains("prefixItems"))
        return combination_error("items", "prefixItems", path);
      if (items == s.end()) items = s.find("prefixItems");
      if (items != s.end() && items->is_array()) kind = Kind::kTuple;
    }
    unsigned values = kTAll;
    switch (kind) {
      case Kind::kObject:
        values = kTObject;
        break;
      case Kind::kArray:
      case Kind::kTuple:
        values = kTArray;
        break;
      case Kind::kString:
        values = kTString;
        break;
      case Kind::kInteger:
        values = kTInteger;
        break;
      case Kind::kNumber:
        values = kTNumeric;
        break;
      case Kind::kBoolean:
        values = kTBoolean;
        break;
      case Kind::kNull:
        values = kTNull;
        break;
      default:
        break;
    }
    GANTRY_RETURN_IF_ERROR(check_applied(s, kind, values, path));
    switch (kind) {
      case Kind::kObject:
        return object(s, path, name);
      case Kind::kArray: {
        GANTRY_RETURN_IF_ERROR(check_counts(s, "minItems", "maxItems", "an item", path));
        auto items = s.find("items");
        if (items == s.end()) items = s.find("prefixItems");
        if (items != s.end()) {
          if (!items->is_object() && !items->is_boolean()) {
            return InvalidArgument("'items' at " + where(path) + " must be a schema or an array of them");
          }
          GANTRY_RETURN_IF_ERROR(visit(*items, path.child(items.key()), name + kIndexName).status());
        }
        return size_t{1};
      }
      case Kind::kTuple: {
        auto items = s.find("items");
        if (items == s.end()) items = s.find("prefixItems");
        // llama.cpp generates exactly the tuple's items.
        const auto n = static_cast<int64_t>(items->size());
        GANTRY_RETURN_IF_ERROR(check_counts(s, "minItems", "maxItems", "an item", path));
        if ((s.contains("minItems") && s.at("minItems").get<int64_t>() > n) ||
            (s.contains("maxItems") && s.at("maxItems").get<int64_t>() < n)) {
          return InvalidArgument("'minItems' or 'maxItems' at " + where(path) + " does not admit the " +
                                 std::to_string(n) +
                                 " items of its tuple (llama.cpp generates exactly them)");
        }
        const Path tuple = path.child(items.key());
        for (size_t i = 0; i < items->size(); ++i) {
          GANTRY_RETURN_IF_ERROR(visit((*items)[i], tuple.child(i), name + kIndexName).status());
        }
        return size_t{1};
      }
      case Kind::kString:
        if (s.contains("format")) {
          if (!known_format(s.at("format"))) {
            return InvalidArgument("unsupported JSON schema keyword 'format' " +
                                   cut(json_text(s.at("format"))) + " at " + where(path) +
                                   " (supported formats: date, time, date-time, uuid)");
          }
          return size_t{1};
        }
        GANTRY_RETURN_IF_ERROR(check_counts(s, "minLength", "maxLength", "a character", path));
        return size_t{1};
      case Kind::kInteger:
        GANTRY_RETURN_IF_ERROR(check_integer(s, path));
        return size_t{1};
      default:
        return size_t{1};
    }
  }

  Result<size_t> object(Json& s, const Path& path, size_t name) {
    if (auto ap = s.find("additionalProperties"); ap != s.end() && !ap->is_boolean()) {
      return InvalidArgument("'additionalProperties' at " + where(path) +
                             " must be true or false (a schema for extra properties is not supported)");
    }
    auto props = s.find("properties");
    if (props == s.end()) {
      if (s.contains("required") && !(s.at("required").is_array() && s.at("required").empty())) {
        return InvalidArgument("'required' at " + where(path) +
                               " names properties, but it has no 'properties'");
      }
      return size_t{1};
    }
    if (!props->is_object()) return InvalidArgument("'properties' at " + where(path) + " must be an object");
    std::set<std::string_view> names, required;
    for (const auto& [k, v] : props->items()) names.insert(k);
    if (auto r = s.find("required"); r != s.end()) {
      if (!r->is_array()) return InvalidArgument("'required' at " + where(path) + " must be an array");
      for (const auto& n : *r) {
        if (!n.is_string() || !names.contains(n.get_ref<const std::string&>())) {
          return InvalidArgument("'required' at " + where(path) + " names " + cut(json_text(n), 200) +
                                 ", which is not in its 'properties'");
        }
        required.insert(n.get_ref<const std::string&>());
      }
    }
    // Where the optional ones may start, each is an alternative.
    const size_t optional = names.size() - required.size();
    GANTRY_RETURN_IF_ERROR(check_width(optional, "'properties' (the optional ones)", path));
    // What llama.cpp's converter spends on their rules (kMaxSchemaOptionalWork).
    size_t longest = 0;
    for (std::string_view n : names) {
      if (!required.contains(n)) longest = std::max(longest, n.size());
    }
    optional_work_ += optional * optional * (name + longest + kOptionalWorkPerRule);
    if (optional_work_ > kMaxSchemaOptionalWork) {
      return too_large("the optional properties of " + where(path) +
                           " (and of the objects before it) have too long names for their number: "
                           "llama.cpp's converter would take time growing with their number squared times "
                           "the length of their names (" +
                           std::to_string(optional_work_) + ")",
                       kMaxSchemaOptionalWork);
    }
    const Path props_path = path.child("properties");
    for (auto& [k, v] : props->items()) {
      GANTRY_RETURN_IF_ERROR(add_grammar_bytes(k.size() + 2));
      GANTRY_RETURN_IF_ERROR(visit(v, props_path.child(k), name + 1 + k.size()).status());
    }
    return size_t{1};
  }

  Json& root_;
  size_t nodes_ = 0;
  size_t enum_values_ = 0;
  size_t grammar_bytes_ = 0;  // at least this much grammar text
  size_t optional_work_ = 0;
  std::map<std::string, size_t> refs_;  // $ref target -> its width (1 while in progress)
};

}  // namespace

Status check_schema(Json& schema) {
  GANTRY_RETURN_IF_ERROR(ShapeCheck().check(schema, 1));
  Checker c(schema);
  GANTRY_RETURN_IF_ERROR(c.visit(schema, Path{}, 0).status());
  return c.check_grammar_estimate();
}

}  // namespace gantry::llama
