// API keys (runtime/, beside the tenants they name): read from files, for `gantry serve`, read from files,
// accepted as `Authorization: Bearer <key>`, `api-key: <key>` or `x-api-key: <key>`, compared in constant
// time against every configured key (so timing tells nothing about how much matched). A request's owner
// (owner()) names the key it carries by its position, so what a key's requests make (stored responses) can be
// kept apart without the key itself ever being stored or logged.
//
// A file is either bare keys (one per non-empty line, '#' starts a comment), all of them the one
// unlimited tenant "default", or a JSON tenants file ({"tenants": [{"name", "keys", limits...}]}, its
// first character '{'; docs/tenants.md): each key belongs to a named tenant with its limits
// (TenantLimits). A request's tenant() is the name of its key's tenant, never the key.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/runtime/tenant.h"

namespace gantry::runtime {

class ApiKeys {
 public:
  ApiKeys() = default;
  // Reads every file; fails naming the file when one is unreadable, holds no key, or (a tenants file)
  // is not valid: a field it does not know, a bad limit, a tenant or a key named twice. `inline_keys`
  // (--api-key, none empty) are the default tenant's, as a bare keys file's are. `previous` (a reload): a
  // key it held keeps its owner() number, so what it stored stays its own.
  static Result<ApiKeys> from_files(std::span<const std::filesystem::path> files,
                                    std::vector<std::string> inline_keys = {},
                                    const ApiKeys* previous = nullptr);
  static ApiKeys from_keys(std::vector<std::string> keys);
  // A tenants file's text (`source` names it in errors).
  static Result<ApiKeys> from_json(std::string_view text, std::string_view source = "tenants file");

  // Every tenant the files name, with its limits, by name.
  struct TenantEntry {
    std::string name;
    TenantLimits limits;
  };
  const std::vector<TenantEntry>& tenants() const { return tenants_; }
  // The name of the tenant whose key the request carries; "" when no key is configured or it carries
  // none of them (compared as allows() does).
  std::string tenant(const std::function<std::optional<std::string_view>(std::string_view)>& header) const;

  bool empty() const { return keys_.empty(); }
  size_t size() const { return keys_.size(); }
  // True when no key is configured or the request carries one of the keys.
  // The same for any protocol: `header` returns the value of a (lower-case) header or metadata key
  // (gRPC metadata carries the same three names).
  using HeaderLookup = std::function<std::optional<std::string_view>(std::string_view name)>;
  bool allows(const HeaderLookup& header) const;

  // Whose the request is: 1 + the position of the first configured key equal to the one it carries
  // (keys repeated across files are one owner); 0 when no key is configured (every client is the same
  // owner) or it carries no configured key. Every key is compared, in constant time, as by allows().
  size_t owner(const HeaderLookup& header) const;

 private:
  // 1 + the position of the key `header` offers, 0 when none matches.
  size_t match(const HeaderLookup& header) const;

  // Adds `key` for `tenant` (owner numbers: the position, unless `previous` had it).
  void add_key(std::string key, size_t tenant);

  std::vector<std::string> keys_;
  std::vector<size_t> owners_;      // per key: its owner() number
  std::vector<size_t> key_tenant_;  // per key: its tenant's position in tenants_
  std::vector<TenantEntry> tenants_;
};

// Equal length and bytes, in time that depends only on the lengths.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace gantry::runtime
