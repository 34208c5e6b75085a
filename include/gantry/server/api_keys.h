// API keys for `gantry serve`: read from files (one key per non-empty line, '#' starts a comment),
// accepted as `Authorization: Bearer <key>`, `api-key: <key>` or `x-api-key: <key>`, compared in
// constant time against every configured key (so timing tells nothing about how much matched).
// A request's owner (owner()) names the key it carries by its position, so what a key's requests make
// (stored responses) can be kept apart without the key itself ever being stored or logged.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/server/http_server.h"

namespace gantry::server {

class ApiKeys {
 public:
  ApiKeys() = default;
  // Reads every file; fails naming the file when one is unreadable or holds no key. `inline_keys`
  // (--api-key, none empty) come first.
  static Result<ApiKeys> from_files(std::span<const std::filesystem::path> files,
                                    std::vector<std::string> inline_keys = {});
  static ApiKeys from_keys(std::vector<std::string> keys);

  bool empty() const { return keys_.empty(); }
  size_t size() const { return keys_.size(); }
  // True when no key is configured or the request carries one of the keys.
  bool allows(const HttpRequest& request) const;
  // The same for any protocol: `header` returns the value of a (lower-case) header or metadata key
  // (gRPC metadata carries the same three names).
  using HeaderLookup = std::function<std::optional<std::string_view>(std::string_view name)>;
  bool allows(const HeaderLookup& header) const;

  // Whose the request is: 1 + the position of the first configured key equal to the one it carries
  // (keys repeated across files are one owner); 0 when no key is configured (every client is the same
  // owner) or it carries no configured key. Every key is compared, in constant time, as by allows().
  size_t owner(const HttpRequest& request) const;
  size_t owner(const HeaderLookup& header) const;

 private:
  // 1 + the position of the key `header` offers, 0 when none matches.
  size_t match(const HeaderLookup& header) const;

  std::vector<std::string> keys_;
};

// Equal length and bytes, in time that depends only on the lengths.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace gantry::server
