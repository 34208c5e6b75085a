#include "gantry/core/version.h"

#include <charconv>

namespace gantry {

Result<Version> Version::parse(std::string_view text) {
  std::string_view s = text;
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) s.remove_suffix(1);
  if (!s.empty() && (s.front() == 'v' || s.front() == 'V')) s.remove_prefix(1);
  if (auto cut = s.find_first_of("-+"); cut != std::string_view::npos) s = s.substr(0, cut);
  std::vector<uint32_t> parts;
  while (true) {
    uint32_t value = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (ec != std::errc() || ptr == s.data()) {
      return InvalidArgument("'" + std::string(text) + "' is not a version (expected numbers like 12.2 or 535.104.05)");
    }
    parts.push_back(value);
    s.remove_prefix(static_cast<size_t>(ptr - s.data()));
    if (s.empty()) break;
    if (s.front() != '.' || parts.size() == 4) {
      return InvalidArgument("'" + std::string(text) + "' is not a version (expected numbers like 12.2 or 535.104.05)");
    }
    s.remove_prefix(1);
  }
  return Version(std::move(parts));
}

std::string Version::to_string() const {
  std::string out;
  for (size_t i = 0; i < parts_.size(); ++i) {
    if (i) out += '.';
    out += std::to_string(parts_[i]);
  }
  return out;
}

std::strong_ordering Version::operator<=>(const Version& other) const {
  const size_t n = std::max(parts_.size(), other.parts_.size());
  for (size_t i = 0; i < n; ++i) {
    const uint32_t a = i < parts_.size() ? parts_[i] : 0;
    const uint32_t b = i < other.parts_.size() ? other.parts_[i] : 0;
    if (a != b) return a <=> b;
  }
  return std::strong_ordering::equal;
}

}  // namespace gantry
