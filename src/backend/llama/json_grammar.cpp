#include "gantry/backend/llama/json_grammar.h"

#include <cstdint>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>
#include <vector>

#include "gantry/core/json.h"

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
    for (char c : (*it)->key) {
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

// A rule-name hint for a child: bounded, since keys may be any size and hints grow with the depth.
std::string child_hint(const std::string& hint, std::string_view suffix) {
  constexpr size_t kMaxChars = 48;
  std::string h = hint + "-" + std::string(suffix.substr(0, kMaxChars));
  if (h.size() > kMaxChars) h.resize(kMaxChars);
  return h;
}

// A GBNF expression (a rule name or a parenthesized group) and how many alternatives it offers at its
// first token (what llama.cpp expands it into: one grammar stack each, checked against the whole
// vocabulary at every step the sequence spends there).
struct Expr {
  std::string text;
  size_t width = 1;
};

Status too_large(const std::string& what, size_t limit) {
  return InvalidArgument("the JSON schema is too large: " + what + " (at most " + std::to_string(limit) +
                         "; a larger schema would make its grammar slow to build and to apply)");
}

class Converter {
 public:
  explicit Converter(const Json& root) {
    // $ref targets by name (ordered_json looks keys up linearly: a schema may have many $defs).
    if (!root.is_object()) return;
    for (const char* section : {"$defs", "definitions"}) {
      auto it = root.find(section);
      if (it == root.end() || !it->is_object()) continue;
      for (const auto& [name, def] : it->items())
        defs_.emplace(std::string("#/") + section + "/" + name, &def);
    }
  }

  // The expression for values valid against `s`.
  Result<Expr> visit(const Json& s, const Path& path, const std::string& hint) {
    GANTRY_RETURN_IF_ERROR(count_node());
    if (s.is_boolean()) {
      if (s.get<bool>()) return Expr{"value"};
      return InvalidArgument("the JSON schema 'false' at " + where(path) + " accepts no value");
    }
    if (!s.is_object()) {
      return InvalidArgument("a JSON schema must be an object or a boolean, got " +
                             std::string(s.type_name()) + " at " + where(path));
    }
    for (const auto& [k, v] : s.items()) {
      if (!kKeywords.contains(k) && !kAnnotations.contains(k)) {
        return InvalidArgument("unsupported JSON schema keyword '" + k.substr(0, 64) + "' at " + where(path) +
                               " (supported: type, properties, required, additionalProperties, items, "
                               "enum, const, anyOf, minLength, maxLength, $ref, $defs)");
      }
    }
    const auto has = [&](const char* k) { return s.contains(k); };
    if (has("$ref")) {
      for (const char* k : {"type", "properties", "items", "enum", "const", "anyOf"}) {
        if (has(k)) return combination_error("$ref", k, path);
      }
      return ref(s["$ref"], path.child("$ref"));
    }
    if (has("const")) return Expr{literal(json_text(s["const"]))};
    if (has("enum")) {
      const Json& e = s["enum"];
      if (!e.is_array() || e.empty()) {
        return InvalidArgument("'enum' at " + where(path) + " must be a non-empty array");
      }
      enum_values_ += e.size();
      if (enum_values_ > kMaxSchemaEnumValues) {
        return too_large("more than " + std::to_string(kMaxSchemaEnumValues) + " enum values in all",
                         kMaxSchemaEnumValues);
      }
      GANTRY_RETURN_IF_ERROR(check_width(e.size(), "'enum'", path));
      std::string alts;
      for (const auto& v : e) alts += (alts.empty() ? "" : " | ") + literal(json_text(v));
      return Expr{"(" + alts + ")", e.size()};
    }
    if (has("anyOf")) {
      for (const char* k : {"type", "properties", "items"}) {
        if (has(k)) return combination_error("anyOf", k, path);
      }
      const Json& a = s["anyOf"];
      if (!a.is_array() || a.empty()) {
        return InvalidArgument("'anyOf' at " + where(path) + " must be a non-empty array");
      }
      const Path any_of = path.child("anyOf");
      Expr alts{"", 0};
      for (size_t i = 0; i < a.size(); ++i) {
        GANTRY_ASSIGN_OR_RETURN(Expr e, visit(a[i], any_of.child(i), hint));
        alts.text += (alts.text.empty() ? "" : " | ") + e.text;
        alts.width += e.width;
        GANTRY_RETURN_IF_ERROR(check_width(alts.width, "'anyOf'", path));
      }
      return Expr{"(" + alts.text + ")", alts.width};
    }
    if (has("type")) {
      const Json& t = s["type"];
      if (t.is_string()) return visit_type(s, t.get<std::string>(), path, hint);
      if (!t.is_array() || t.empty()) {
        return InvalidArgument("'type' at " + where(path) +
                               " must be a type name or a non-empty array of them");
      }
      Expr alts{"", 0};
      for (const auto& one : t) {
        if (!one.is_string()) return InvalidArgument("'type' at " + where(path) + " lists a non-string");
        GANTRY_RETURN_IF_ERROR(count_node());
        GANTRY_ASSIGN_OR_RETURN(Expr e, visit_type(s, one.get<std::string>(), path, hint));
        alts.text += (alts.text.empty() ? "" : " | ") + e.text;
        alts.width += e.width;
      }
      return Expr{"(" + alts.text + ")", alts.width};
    }
    if (has("properties")) return visit_type(s, "object", path, hint);
    if (has("items")) return visit_type(s, "array", path, hint);
    return Expr{"value"};
  }

  // The grammar text: root first, then our rules, then the shared ones.
  std::string text(const std::string& root_expr) const {
    std::string out = "root ::= " + root_expr + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out + std::string(kBaseRules);
  }

 private:
  Status count_node() {
    if (++nodes_ <= kMaxSchemaNodes) return Status::Ok();
    return too_large("more than " + std::to_string(kMaxSchemaNodes) +
                         " subschemas (each property, items, anyOf branch, type-array entry and $ref'd "
                         "definition counts one)",
                     kMaxSchemaNodes);
  }

  // Alternatives at one point cost every decode step the sequence spends there (see Expr).
  static Status check_width(size_t width, const char* what, const Path& path) {
    if (width <= kMaxSchemaAlternatives) return Status::Ok();
    return too_large(std::string(what) + " at " + where(path) + " offers more than " +
                         std::to_string(kMaxSchemaAlternatives) + " alternatives at one point",
                     kMaxSchemaAlternatives);
  }

  static Status combination_error(const char* a, const char* b, const Path& path) {
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
    // Numbering goes on where the last rule of this base stopped (hints are cut short, so many share one).
    for (int& i = next_number_[base]; names_.contains(name); ++i) name = base + "-" + std::to_string(i);
    names_.insert(name);
    rules_.emplace_back(name, "");
    return rules_.size() - 1;
  }
  std::string add_rule(const std::string& hint, std::string body) {
    const size_t i = reserve(hint);
    rules_[i].second = std::move(body);
    return rules_[i].first;
  }

  Result<Expr> ref(const Json& r, const Path& path) {
    if (!r.is_string()) return InvalidArgument("'$ref' at " + where(path) + " must be a string");
    const std::string& target = r.get_ref<const std::string&>();
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;  // in progress: width 1
    auto def = defs_.find(target);
    if (def == defs_.end()) {
      return InvalidArgument("'$ref' \"" + target.substr(0, 200) + "\" at " + where(path) +
                             " does not name an entry of the root's $defs or definitions "
                             "(only \"#/$defs/<name>\" and \"#/definitions/<name>\" are supported)");
    }
    const std::string_view rest = std::string_view(target).substr(2);  // "<section>/<name>"
    const std::string_view section = rest.substr(0, rest.find('/'));
    const std::string_view name = rest.substr(section.size() + 1);
    const std::string hint = child_hint("def", name);
    const size_t i = reserve(hint);  // reserved first, so a recursive schema refers to it
    refs_[target] = Expr{rules_[i].first};
    const Path defs = root_path_.child(section);
    GANTRY_ASSIGN_OR_RETURN(Expr body, visit(*def->second, defs.child(name), hint));
    rules_[i].second = std::move(body.text);
    refs_[target].width = body.width;
    return refs_[target];
  }

  Result<Expr> visit_type(const Json& s, const std::string& type, const Path& path, const std::string& hint) {
    if (type == "object") return object(s, path, hint);
    if (type == "array") {
      if (!s.contains("items")) return Expr{"array"};
      const Json& items = s["items"];
      if (!items.is_object() && !items.is_boolean()) {
        return InvalidArgument("'items' at " + where(path) +
                               " must be a schema (tuple arrays are not supported)");
      }
      GANTRY_ASSIGN_OR_RETURN(Expr item, visit(items, path.child("items"), child_hint(hint, "item")));
      return Expr{
          add_rule(hint, "\"[\" ws ( " + item.text + " ws ( \",\" ws " + item.text + " ws )* )? \"]\"")};
    }
    if (type == "string") {
      if (!s.contains("minLength") && !s.contains("maxLength")) return Expr{"string"};
      int64_t lo = 0, hi = -1;
      for (const char* k : {"minLength", "maxLength"}) {
        if (!s.contains(k)) continue;
        if (!s[k].is_number_integer() || s[k].get<int64_t>() < 0 ||
            s[k].get<int64_t>() > kMaxSchemaRepetition) {
          return InvalidArgument(std::string("'") + k + "' at " + where(path) + " must be an integer in 0.." +
                                 std::to_string(kMaxSchemaRepetition) +
                                 " (the most llama.cpp's grammar can repeat a character)");
        }
        (std::string_view(k) == "minLength" ? lo : hi) = s[k].get<int64_t>();
      }
      if (hi >= 0 && hi < lo) {
        return InvalidArgument("'maxLength' is below 'minLength' at " + where(path));
      }
      const std::string rep = "{" + std::to_string(lo) + "," + (hi >= 0 ? std::to_string(hi) : "") + "}";
      return Expr{add_rule(hint, "\"\\\"\" char" + rep + " \"\\\"\"")};
    }
    if (type == "number" || type == "integer" || type == "boolean" || type == "null") return Expr{type};
    return InvalidArgument("unknown type '" + type.substr(0, 64) + "' at " + where(path) +
                           " (object, array, string, number, integer, boolean, null)");
  }

  Result<Expr> object(const Json& s, const Path& path, const std::string& hint) {
    if (s.contains("additionalProperties") && !s["additionalProperties"].is_boolean()) {
      return InvalidArgument("'additionalProperties' at " + where(path) +
                             " must be true or false (a schema for extra properties is not supported)");
    }
    if (!s.contains("properties")) return Expr{"object"};
    const Json& props = s["properties"];
    if (!props.is_object()) return InvalidArgument("'properties' at " + where(path) + " must be an object");
    // Properties by name (ordered_json looks keys up linearly: thousands of them would be quadratic).
    std::map<std::string_view, const Json*> by_name;
    for (const auto& [name, schema] : props.items()) by_name.emplace(name, &schema);
    std::vector<std::string_view> required;
    std::set<std::string_view> is_required;
    if (s.contains("required")) {
      const Json& r = s["required"];
      if (!r.is_array()) return InvalidArgument("'required' at " + where(path) + " must be an array");
      for (const auto& n : r) {
        if (!n.is_string() || !by_name.contains(n.get_ref<const std::string&>())) {
          return InvalidArgument("'required' at " + where(path) + " names " + json_text(n).substr(0, 200) +
                                 ", which is not in its 'properties'");
        }
        const std::string_view name = n.get_ref<const std::string&>();
        if (is_required.insert(name).second) required.push_back(name);  // a repeated name once
      }
    }
    const Path props_path = path.child("properties");
    const auto member = [&](std::string_view name) -> Result<std::string> {
      GANTRY_ASSIGN_OR_RETURN(Expr v,
                              visit(*by_name.at(name), props_path.child(name), child_hint(hint, name)));
      return literal(json_text(Json(std::string(name)))) + " ws \":\" ws " + v.text + " ws";
    };
    std::string body = "\"{\" ws";
    for (size_t i = 0; i < required.size(); ++i) {
      GANTRY_ASSIGN_OR_RETURN(std::string m, member(required[i]));
      body += (i ? " \",\" ws " : " ") + m;
    }
    std::vector<std::string_view> optional;
    for (const auto& [name, _] : props.items()) {
      if (!is_required.contains(name)) optional.push_back(name);
    }
    // Where the optional ones may start, each is an alternative (tail(i) below).
    GANTRY_RETURN_IF_ERROR(check_width(optional.size(), "'properties' (the optional ones)", path));
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
        next = add_rule(child_hint(hint, "opt-" + std::string(optional[k].substr(0, 48))), std::move(b));
      }
      body += required.empty() ? " " + next + "?" : " ( \",\" ws " + next + " )?";
    }
    return Expr{add_rule(hint, body + " \"}\"")};
  }

  const Path root_path_{};
  std::map<std::string, const Json*, std::less<>> defs_;  // "#/$defs/<name>" -> its schema
  size_t nodes_ = 0;
  size_t enum_values_ = 0;
  std::vector<std::pair<std::string, std::string>> rules_;  // in creation order
  std::set<std::string> names_;
  std::map<std::string, int> next_number_;  // per rule-name base: the next number to try
  std::map<std::string, Expr> refs_;        // $ref target -> its rule (and width, once known)
};

}  // namespace

std::string json_object_grammar() { return "root ::= object\n" + std::string(kBaseRules); }

Result<std::string> json_schema_grammar(std::string_view schema_json) {
  JsonShapeLimits limits;
  limits.max_object_members = kMaxSchemaNodes;
  limits.max_members = kMaxSchemaMembers;
  GANTRY_ASSIGN_OR_RETURN(const Json schema, parse_json<Json>(schema_json, "the JSON schema", limits));
  Converter c(schema);
  GANTRY_ASSIGN_OR_RETURN(Expr root, c.visit(schema, Path{}, "root"));
  std::string text = c.text(root.text);
  if (text.size() > kMaxGrammarBytes) {
    return too_large("its grammar would take " + std::to_string(text.size()) + " bytes", kMaxGrammarBytes);
  }
  return text;
}

Result<std::string> grammar_for(const backend::OutputConstraint& c) {
  switch (c.kind) {
    case backend::OutputConstraint::Kind::kNone:
      return std::string();
    case backend::OutputConstraint::Kind::kJsonObject:
      return json_object_grammar();
    case backend::OutputConstraint::Kind::kJsonSchema:
      return json_schema_grammar(c.json_schema);
    case backend::OutputConstraint::Kind::kGrammar:
      if (c.grammar.size() > kMaxGrammarBytes) {
        return InvalidArgument("the grammar takes " + std::to_string(c.grammar.size()) + " bytes (at most " +
                               std::to_string(kMaxGrammarBytes) + ")");
      }
      return c.grammar;
  }
  return InvalidArgument("unknown output constraint kind");
}

}  // namespace gantry::llama
