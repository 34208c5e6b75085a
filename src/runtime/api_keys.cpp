#include "gantry/runtime/api_keys.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace gantry::runtime {

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Compare over the longer length so a short guess costs as much as a long one.
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

namespace {
using json = nlohmann::json;
constexpr std::string_view kDefaultTenant = "default";

// A positive whole number of a tenant's entry, or an error naming it.
Result<uint64_t> positive(const json& v, std::string_view where, std::string_view field) {
  if (!v.is_number_integer() || v.get<int64_t>() <= 0) {
    return InvalidArgument(std::string(where) + ": '" + std::string(field) + "' must be a whole number > 0");
  }
  return static_cast<uint64_t>(v.get<int64_t>());
}

Result<TenantLimits> parse_limits(const json& t, const std::string& where) {
  TenantLimits l;
  for (const auto& [field, v] : t.items()) {
    if (field == "name" || field == "keys" || field == "key") continue;
    if (field == "requests_per_minute") {
      GANTRY_ASSIGN_OR_RETURN(l.requests_per_minute, positive(v, where, field));
    } else if (field == "tokens_per_minute") {
      GANTRY_ASSIGN_OR_RETURN(l.tokens_per_minute, positive(v, where, field));
    } else if (field == "max_concurrent") {
      GANTRY_ASSIGN_OR_RETURN(l.max_concurrent, positive(v, where, field));
    } else if (field == "max_tokens") {
      GANTRY_ASSIGN_OR_RETURN(uint64_t n, positive(v, where, field));
      l.max_tokens = static_cast<int>(std::min<uint64_t>(n, 1u << 30));
    } else if (field == "deadline_ms") {
      GANTRY_ASSIGN_OR_RETURN(uint64_t n, positive(v, where, field));
      l.deadline = std::chrono::milliseconds(n);
    } else if (field == "weight") {
      if (!v.is_number() || !(v.get<double>() > 0) || v.get<double>() > 1e6)
        return InvalidArgument(where + ": 'weight' must be a number > 0 (at most 1e6)");
      l.weight = v.get<double>();
    } else if (field == "priority") {
      auto p = v.is_string() ? parse_priority(v.get<std::string>()) : std::nullopt;
      if (!p) return InvalidArgument(where + ": 'priority' must be \"interactive\" or \"batch\"");
      l.priority = *p;
    } else if (field == "models") {
      if (!v.is_array()) return InvalidArgument(where + ": 'models' must be a list of model names");
      for (const auto& m : v) {
        if (!m.is_string() || m.get<std::string>().empty())
          return InvalidArgument(where + ": 'models' must be a list of model names");
        l.models.push_back(m.get<std::string>());
      }
    } else {
      return InvalidArgument(
          where + ": unknown field '" + field +
          "' (known: name, keys, key, requests_per_minute, tokens_per_minute, max_concurrent, "
          "max_tokens, models, priority, weight, deadline_ms)");
    }
  }
  return l;
}
}  // namespace

void ApiKeys::add_key(std::string key, size_t tenant) {
  keys_.push_back(std::move(key));
  owners_.push_back(keys_.size());
  key_tenant_.push_back(tenant);
}

Result<ApiKeys> ApiKeys::from_json(std::string_view text, std::string_view source) {
  const std::string where_file(source);
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return InvalidArgument(where_file + ": not a JSON object");
  for (const auto& [field, v] : doc.items()) {
    if (field != "tenants")
      return InvalidArgument(where_file + ": unknown field '" + field + "' (known: tenants)");
  }
  const auto it = doc.find("tenants");
  if (it == doc.end() || !it->is_array() || it->empty())
    return InvalidArgument(where_file + ": 'tenants' must be a list of at least one tenant");
  ApiKeys keys;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& t = (*it)[i];
    std::string where = where_file + ": tenants[" + std::to_string(i) + "]";
    if (!t.is_object()) return InvalidArgument(where + ": must be an object");
    auto name = t.find("name");
    if (name == t.end() || !name->is_string() || name->get<std::string>().empty())
      return InvalidArgument(where + ": needs a 'name' (what logs and metrics call it)");
    const std::string n = name->get<std::string>();
    where += " ('" + n + "')";
    for (const auto& e : keys.tenants_) {
      if (e.name == n) return InvalidArgument(where + ": the tenant is named twice");
    }
    std::vector<std::string> own;
    if (auto k = t.find("key"); k != t.end()) {
      if (!k->is_string()) return InvalidArgument(where + ": 'key' must be a string");
      own.push_back(k->get<std::string>());
    }
    if (auto k = t.find("keys"); k != t.end()) {
      if (!k->is_array()) return InvalidArgument(where + ": 'keys' must be a list of strings");
      for (const auto& key : *k) {
        if (!key.is_string()) return InvalidArgument(where + ": 'keys' must be a list of strings");
        own.push_back(key.get<std::string>());
      }
    }
    if (own.empty()) return InvalidArgument(where + ": needs 'key' or 'keys'");
    for (const auto& key : own) {
      // Never echoed: a key is only ever said to be wrong, by its tenant's name.
      if (key.size() < 8 || key.find_first_of(" \t\r\n") != std::string::npos)
        return InvalidArgument(where + ": each key must be at least 8 characters, without spaces");
    }
    GANTRY_ASSIGN_OR_RETURN(auto limits, parse_limits(t, where));
    keys.tenants_.push_back({n, std::move(limits)});
    for (auto& key : own) keys.add_key(std::move(key), keys.tenants_.size() - 1);
  }
  return keys;
}

Result<ApiKeys> ApiKeys::from_files(std::span<const std::filesystem::path> files,
                                    std::vector<std::string> inline_keys, const ApiKeys* previous) {
  ApiKeys keys;
  auto tenant_of = [&keys](std::string_view name) -> std::optional<size_t> {
    for (size_t i = 0; i < keys.tenants_.size(); ++i)
      if (keys.tenants_[i].name == name) return i;
    return std::nullopt;
  };
  // --api-key values: the default tenant's, like a bare keys file's.
  for (auto& k : inline_keys) {
    if (k.empty()) return InvalidArgument("--api-key: an empty key");
    auto t = tenant_of(kDefaultTenant);
    if (!t) {
      keys.tenants_.push_back({std::string(kDefaultTenant), {}});
      t = keys.tenants_.size() - 1;
    }
    keys.add_key(std::move(k), *t);
  }
  for (const auto& file : files) {
    std::ifstream in(file);
    if (!in) return IoError("--api-key-file " + file.string() + ": cannot be read");
    std::stringstream buffer;
    buffer << in.rdbuf();
    const std::string text = buffer.str();
    const auto first = text.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && text[first] == '{') {
      GANTRY_ASSIGN_OR_RETURN(ApiKeys part, from_json(text, "--api-key-file " + file.string()));
      for (auto& t : part.tenants_) {
        if (tenant_of(t.name))
          return InvalidArgument("--api-key-file " + file.string() + ": tenant '" + t.name +
                                 "' is named by another file too");
        keys.tenants_.push_back(std::move(t));
      }
      const size_t base = keys.tenants_.size() - part.tenants_.size();
      for (size_t i = 0; i < part.keys_.size(); ++i)
        keys.add_key(std::move(part.keys_[i]), base + part.key_tenant_[i]);
      continue;
    }
    size_t before = keys.keys_.size();
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
      auto hash = line.find('#');
      if (hash != std::string::npos) line.resize(hash);
      const auto b = line.find_first_not_of(" \t\r");
      if (b == std::string::npos) continue;
      const auto e = line.find_last_not_of(" \t\r");
      auto t = tenant_of(kDefaultTenant);
      if (!t) {
        keys.tenants_.push_back({std::string(kDefaultTenant), {}});
        t = keys.tenants_.size() - 1;
      }
      keys.add_key(line.substr(b, e - b + 1), *t);
    }
    if (keys.keys_.size() == before) {
      return InvalidArgument("--api-key-file " + file.string() +
                             ": holds no key (write one key per line, e.g. the output of `openssl rand -hex "
                             "32`, or a JSON tenants "
                             "file: docs/tenants.md)");
    }
  }
  // One key in two tenants would make whose a request is depend on the order: refused. (Load time,
  // not a request: no need for constant time here.)
  for (size_t i = 0; i < keys.keys_.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (keys.keys_[i] == keys.keys_[j] && keys.key_tenant_[i] != keys.key_tenant_[j]) {
        return InvalidArgument("--api-key-file: one key is given to both tenant '" +
                               keys.tenants_[keys.key_tenant_[j]].name + "' and '" +
                               keys.tenants_[keys.key_tenant_[i]].name + "'");
      }
    }
  }
  // Owner numbers: a repeated key is its first copy's; a key `previous` held keeps its number; a new
  // one takes a number no key had before.
  size_t next = 1;
  if (previous)
    for (size_t o : previous->owners_) next = std::max(next, o + 1);
  for (size_t i = 0; i < keys.keys_.size(); ++i) {
    std::optional<size_t> owner;
    for (size_t j = 0; j < i && !owner; ++j)
      if (keys.keys_[j] == keys.keys_[i]) owner = keys.owners_[j];
    if (!owner && previous) {
      for (size_t j = 0; j < previous->keys_.size() && !owner; ++j)
        if (previous->keys_[j] == keys.keys_[i]) owner = previous->owners_[j];
    }
    keys.owners_[i] = owner ? *owner : (previous ? next++ : i + 1);
  }
  return keys;
}

ApiKeys ApiKeys::from_keys(std::vector<std::string> keys) {
  ApiKeys k;
  k.tenants_.push_back({std::string(kDefaultTenant), {}});
  for (auto& key : keys) k.add_key(std::move(key), 0);
  for (size_t i = 0; i < k.keys_.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (k.keys_[j] == k.keys_[i]) {
        k.owners_[i] = k.owners_[j];
        break;
      }
  return k;
}

bool ApiKeys::allows(const HeaderLookup& header) const { return keys_.empty() || match(header) != 0; }

size_t ApiKeys::owner(const HeaderLookup& header) const {
  if (keys_.empty()) return 0;
  const size_t m = match(header);
  return m == 0 ? 0 : owners_[m - 1];
}

std::string ApiKeys::tenant(const HeaderLookup& header) const {
  if (keys_.empty()) return {};
  const size_t m = match(header);
  return m == 0 ? std::string() : tenants_[key_tenant_[m - 1]].name;
}

size_t ApiKeys::match(const HeaderLookup& header) const {
  std::string_view offered;
  if (auto auth = header("authorization")) {
    std::string_view v = *auth;
    constexpr std::string_view kBearer = "bearer ";
    if (v.size() > kBearer.size()) {
      bool is_bearer = true;
      for (size_t i = 0; i < kBearer.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(v[i])) != kBearer[i]) is_bearer = false;
      }
      if (is_bearer) offered = v.substr(kBearer.size());
    }
  }
  if (offered.empty()) {
    if (auto k = header("api-key")) offered = *k;
  }
  if (offered.empty()) {
    if (auto k = header("x-api-key")) offered = *k;
  }
  if (offered.empty()) return 0;
  // No early exit, and the first match is selected with masks rather than a branch on it.
  size_t found = 0;
  for (size_t i = 0; i < keys_.size(); ++i) {
    const size_t equal = constant_time_equal(offered, keys_[i]) ? 1 : 0;
    const size_t take = static_cast<size_t>(0) - (equal & static_cast<size_t>(found == 0));  // all ones or 0
    found = (found & ~take) | ((i + 1) & take);
  }
  return found;
}

}  // namespace gantry::runtime
