#include "gantry/server/api_keys.h"

#include <fstream>

namespace gantry::server {

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

Result<ApiKeys> ApiKeys::from_files(std::span<const std::filesystem::path> files,
                                    std::vector<std::string> inline_keys) {
  ApiKeys keys;
  for (auto& k : inline_keys) {
    if (k.empty()) return InvalidArgument("--api-key: an empty key");
    keys.keys_.push_back(std::move(k));
  }
  for (const auto& file : files) {
    std::ifstream in(file);
    if (!in) return IoError("--api-key-file " + file.string() + ": cannot be read");
    size_t before = keys.keys_.size();
    std::string line;
    while (std::getline(in, line)) {
      auto hash = line.find('#');
      if (hash != std::string::npos) line.resize(hash);
      const auto b = line.find_first_not_of(" \t\r");
      if (b == std::string::npos) continue;
      const auto e = line.find_last_not_of(" \t\r");
      keys.keys_.push_back(line.substr(b, e - b + 1));
    }
    if (keys.keys_.size() == before) {
      return InvalidArgument(
          "--api-key-file " + file.string() +
          ": holds no key (write one key per line, e.g. the output of `openssl rand -hex 32`)");
    }
  }
  return keys;
}

ApiKeys ApiKeys::from_keys(std::vector<std::string> keys) {
  ApiKeys k;
  k.keys_ = std::move(keys);
  return k;
}

bool ApiKeys::allows(const HttpRequest& request) const {
  return allows([&request](std::string_view name) { return request.header(name); });
}

bool ApiKeys::allows(const HeaderLookup& header) const { return keys_.empty() || match(header) != 0; }

size_t ApiKeys::owner(const HttpRequest& request) const {
  return owner([&request](std::string_view name) { return request.header(name); });
}

size_t ApiKeys::owner(const HeaderLookup& header) const { return keys_.empty() ? 0 : match(header); }

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

}  // namespace gantry::server
