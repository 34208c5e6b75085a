#include "gantry/backend/llama/json_grammar.h"

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>
#include <vector>

namespace gantry::llama {

namespace {

// ordered_json keeps `properties` in the order the schema lists them (the optional ones are
// generated in that order).
using Json = nlohmann::ordered_json;

// The shared rules every grammar gets (unused ones are harmless). `ws` is bounded on purpose.
constexpr std::string_view kBaseRules = R"(ws ::= | " " | "\n" " "{0,8}
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( "," ws member )* )? "}"
member ::= string ws ":" ws value ws
array ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" char* "\""
char ::= [^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
integer ::= "-"? ( "0" | [1-9] [0-9]{0,15} )
number ::= integer ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?
boolean ::= "true" | "false"
null ::= "null"
)";

const std::set<std::string, std::less<>> kKeywords = {
    "type",       "properties", "required", "additionalProperties",
    "items",      "enum",       "const",    "anyOf",
    "minLength",  "maxLength",  "$ref",     "$defs",
    "definitions"};
const std::set<std::string, std::less<>> kAnnotations = {"title",   "description", "default", "examples",
                                                         "$schema", "$id",         "$comment"};

// A GBNF string literal matching exactly `bytes`.
std::string literal(std::string_view bytes) {
  std::string out = "\"";
  for (char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7F) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02X", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

// The compact JSON text of `v` (what the model must produce for a const or enum value).
std::string json_text(const Json& v) { return v.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string pointer_child(const std::string& path, const std::string& key) {
  std::string k;
  for (char c : key) {
    if (c == '~')
      k += "~0";
    else if (c == '/')
      k += "~1";
    else
      k += c;
  }
  return path + "/" + k;
}

std::string where(const std::string& path) { return path.empty() ? "the schema root" : "'" + path + "'"; }

class Converter {
 public:
  explicit Converter(const Json& root) : root_(root) {}

  // A GBNF expression (a rule name or a parenthesized group) for values valid against `s`.
  Result<std::string> visit(const Json& s, const std::string& path, const std::string& hint) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return std::string("value");
      return InvalidArgument("the JSON schema 'false' at " + where(path) + " accepts no value");
    }
    if (!s.is_object()) {
      return InvalidArgument("a JSON schema must be an object or a boolean, got " +
                             std::string(s.type_name()) + " at " + where(path));
    }
    for (const auto& [k, v] : s.items()) {
      if (!kKeywords.contains(k) && !kAnnotations.contains(k)) {
        return InvalidArgument("unsupported JSON schema keyword '" + k + "' at " + where(path) +
                               " (supported: type, properties, required, additionalProperties, items, "
                               "enum, const, anyOf, minLength, maxLength, $ref, $defs)");
      }
    }
    const auto has = [&](const char* k) { return s.contains(k); };
    if (has("$ref")) {
      for (const char* k : {"type", "properties", "items", "enum", "const", "anyOf"}) {
        if (has(k)) return combination_error("$ref", k, path);
      }
      return ref(s["$ref"], pointer_child(path, "$ref"));
    }
    if (has("const")) return literal(json_text(s["const"]));
    if (has("enum")) {
      const Json& e = s["enum"];
      if (!e.is_array() || e.empty()) {
        return InvalidArgument("'enum' at " + where(path) + " must be a non-empty array");
      }
      std::string alts;
      for (const auto& v : e) alts += (alts.empty() ? "" : " | ") + literal(json_text(v));
      return "(" + alts + ")";
    }
    if (has("anyOf")) {
      for (const char* k : {"type", "properties", "items"}) {
        if (has(k)) return combination_error("anyOf", k, path);
      }
      const Json& a = s["anyOf"];
      if (!a.is_array() || a.empty()) {
        return InvalidArgument("'anyOf' at " + where(path) + " must be a non-empty array");
      }
      std::string alts;
      for (size_t i = 0; i < a.size(); ++i) {
        GANTRY_ASSIGN_OR_RETURN(std::string e,
                                visit(a[i], pointer_child(path, "anyOf") + "/" + std::to_string(i), hint));
        alts += (alts.empty() ? "" : " | ") + e;
      }
      return "(" + alts + ")";
    }
    if (has("type")) {
      const Json& t = s["type"];
      if (t.is_string()) return visit_type(s, t.get<std::string>(), path, hint);
      if (!t.is_array() || t.empty()) {
        return InvalidArgument("'type' at " + where(path) +
                               " must be a type name or a non-empty array of them");
      }
      std::string alts;
      for (const auto& one : t) {
        if (!one.is_string()) return InvalidArgument("'type' at " + where(path) + " lists a non-string");
        GANTRY_ASSIGN_OR_RETURN(std::string e, visit_type(s, one.get<std::string>(), path, hint));
        alts += (alts.empty() ? "" : " | ") + e;
      }
      return "(" + alts + ")";
    }
    if (has("properties")) return visit_type(s, "object", path, hint);
    if (has("items")) return visit_type(s, "array", path, hint);
    return std::string("value");
  }

  // The grammar text: root first, then our rules, then the shared ones.
  std::string text(const std::string& root_expr) const {
    std::string out = "root ::= " + root_expr + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out + std::string(kBaseRules);
  }

 private:
  static Status combination_error(const char* a, const char* b, const std::string& path) {
    return InvalidArgument(std::string("'") + a + "' together with '" + b + "' at " + where(path) +
                           " is not supported");
  }

  // Reserves a unique rule name from `hint` (GBNF names are [a-zA-Z0-9-]).
  size_t reserve(const std::string& hint) {
    std::string base;
    for (char c : hint) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
      base += ok ? c : '-';
    }
    if (base.empty()) base = "rule";
    base = "s-" + base;  // never clashes with the shared rules or "root"
    std::string name = base;
    for (int i = 2; names_.contains(name); ++i) name = base + "-" + std::to_string(i);
    names_.insert(name);
    rules_.emplace_back(name, "");
    return rules_.size() - 1;
  }
  std::string add_rule(const std::string& hint, std::string body) {
    const size_t i = reserve(hint);
    rules_[i].second = std::move(body);
    return rules_[i].first;
  }

  Result<std::string> ref(const Json& r, const std::string& path) {
    if (!r.is_string()) return InvalidArgument("'$ref' at " + where(path) + " must be a string");
    const std::string target = r.get<std::string>();
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    const Json* def = nullptr;
    std::string name;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      const std::string p = prefix;
      if (target.rfind(p, 0) != 0) continue;
      name = target.substr(p.size());
      const std::string section = p.substr(2, p.size() - 3);
      if (root_.contains(section) && root_.at(section).is_object() && root_.at(section).contains(name)) {
        def = &root_.at(section).at(name);
      }
    }
    if (!def) {
      return InvalidArgument("'$ref' \"" + target + "\" at " + where(path) +
                             " does not name an entry of the root's $defs or definitions "
                             "(only \"#/$defs/<name>\" and \"#/definitions/<name>\" are supported)");
    }
    const size_t i = reserve("def-" + name);  // reserved first, so a recursive schema refers to it
    refs_[target] = rules_[i].first;
    GANTRY_ASSIGN_OR_RETURN(std::string body, visit(*def, target.substr(1), "def-" + name));
    rules_[i].second = std::move(body);
    return rules_[i].first;
  }

  Result<std::string> visit_type(const Json& s, const std::string& type, const std::string& path,
                                 const std::string& hint) {
    if (type == "object") return object(s, path, hint);
    if (type == "array") {
      if (!s.contains("items")) return std::string("array");
      const Json& items = s["items"];
      if (!items.is_object() && !items.is_boolean()) {
        return InvalidArgument("'items' at " + where(path) +
                               " must be a schema (tuple arrays are not supported)");
      }
      GANTRY_ASSIGN_OR_RETURN(std::string item, visit(items, pointer_child(path, "items"), hint + "-item"));
      return add_rule(hint, "\"[\" ws ( " + item + " ws ( \",\" ws " + item + " ws )* )? \"]\"");
    }
    if (type == "string") {
      if (!s.contains("minLength") && !s.contains("maxLength")) return std::string("string");
      int64_t lo = 0, hi = -1;
      for (const char* k : {"minLength", "maxLength"}) {
        if (!s.contains(k)) continue;
        if (!s[k].is_number_integer() || s[k].get<int64_t>() < 0 || s[k].get<int64_t>() > 4096) {
          return InvalidArgument(std::string("'") + k + "' at " + where(path) +
                                 " must be an integer in 0..4096");
        }
        (std::string_view(k) == "minLength" ? lo : hi) = s[k].get<int64_t>();
      }
      if (hi >= 0 && hi < lo) {
        return InvalidArgument("'maxLength' is below 'minLength' at " + where(path));
      }
      const std::string rep = "{" + std::to_string(lo) + "," + (hi >= 0 ? std::to_string(hi) : "") + "}";
      return add_rule(hint, "\"\\\"\" char" + rep + " \"\\\"\"");
    }
    if (type == "number" || type == "integer" || type == "boolean" || type == "null") return type;
    return InvalidArgument("unknown type '" + type + "' at " + where(path) +
                           " (object, array, string, number, integer, boolean, null)");
  }

  Result<std::string> object(const Json& s, const std::string& path, const std::string& hint) {
    if (s.contains("additionalProperties") && !s["additionalProperties"].is_boolean()) {
      return InvalidArgument("'additionalProperties' at " + where(path) +
                             " must be true or false (a schema for extra properties is not supported)");
    }
    if (!s.contains("properties")) return std::string("object");
    const Json& props = s["properties"];
    if (!props.is_object()) return InvalidArgument("'properties' at " + where(path) + " must be an object");
    std::vector<std::string> required;
    if (s.contains("required")) {
      const Json& r = s["required"];
      if (!r.is_array()) return InvalidArgument("'required' at " + where(path) + " must be an array");
      for (const auto& n : r) {
        if (!n.is_string() || !props.contains(n.get<std::string>())) {
          return InvalidArgument("'required' at " + where(path) + " names " + json_text(n) +
                                 ", which is not in its 'properties'");
        }
        required.push_back(n.get<std::string>());
      }
    }
    const std::string props_path = pointer_child(path, "properties");
    const auto member = [&](const std::string& name) -> Result<std::string> {
      GANTRY_ASSIGN_OR_RETURN(std::string v,
                              visit(props[name], pointer_child(props_path, name), hint + "-" + name));
      return literal(json_text(Json(name))) + " ws \":\" ws " + v + " ws";
    };
    std::string body = "\"{\" ws";
    for (size_t i = 0; i < required.size(); ++i) {
      GANTRY_ASSIGN_OR_RETURN(std::string m, member(required[i]));
      body += (i ? " \",\" ws " : " ") + m;
    }
    std::vector<std::string> optional;
    for (const auto& [name, _] : props.items()) {
      bool req = false;
      for (const auto& r : required) req = req || r == name;
      if (!req) optional.push_back(name);
    }
    if (!optional.empty()) {
      // tail(i): the optional members from i on, each present or not, comma-separated:
      //   tail(i) ::= member_i ( "," ws tail(i+1) )? | tail(i+1);   tail(last) ::= member_last
      std::vector<std::string> members;
      for (const auto& name : optional) {
        GANTRY_ASSIGN_OR_RETURN(std::string m, member(name));
        members.push_back(std::move(m));
      }
      std::string next;
      for (size_t k = optional.size(); k-- > 0;) {
        std::string b = members[k];
        if (!next.empty()) b = members[k] + " ( \",\" ws " + next + " )? | " + next;
        next = add_rule(hint + "-opt-" + optional[k], std::move(b));
      }
      body += required.empty() ? " " + next + "?" : " ( \",\" ws " + next + " )?";
    }
    return add_rule(hint, body + " \"}\"");
  }

  const Json& root_;
  std::vector<std::pair<std::string, std::string>> rules_;  // in creation order
  std::set<std::string> names_;
  std::map<std::string, std::string> refs_;  // $ref target -> rule name
};

}  // namespace

std::string json_object_grammar() { return "root ::= object\n" + std::string(kBaseRules); }

Result<std::string> json_schema_grammar(std::string_view schema_json) {
  Json schema = Json::parse(schema_json, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return InvalidArgument("the JSON schema is not valid JSON");
  Converter c(schema);
  GANTRY_ASSIGN_OR_RETURN(std::string root, c.visit(schema, "", "root"));
  return c.text(root);
}

Result<std::string> grammar_for(const backend::OutputConstraint& c) {
  switch (c.kind) {
    case backend::OutputConstraint::Kind::kNone:
      return std::string();
    case backend::OutputConstraint::Kind::kJsonObject:
      return json_object_grammar();
    case backend::OutputConstraint::Kind::kJsonSchema:
      return json_schema_grammar(c.json_schema);
  }
  return InvalidArgument("unknown output constraint kind");
}

}  // namespace gantry::llama
