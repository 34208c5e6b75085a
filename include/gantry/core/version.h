// Version: a dotted numeric version ("9.0", "11.8", "535.104.05", "v1.29.0") compared
// component by component as numbers, never as strings: "9.0" < "11.8", "12" == "12.0".
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"

namespace gantry {

class Version {
 public:
  Version() = default;
  explicit Version(std::vector<uint32_t> parts) : parts_(std::move(parts)) {}

  // Accepts an optional leading 'v', then 1..4 dot-separated decimal components, then an optional
  // pre-release/build suffix starting with '-' or '+' (ignored for ordering).
  static Result<Version> parse(std::string_view text);

  const std::vector<uint32_t>& parts() const { return parts_; }
  uint32_t major() const { return parts_.empty() ? 0 : parts_[0]; }
  std::string to_string() const;

  // Missing trailing components count as zero.
  std::strong_ordering operator<=>(const Version& other) const;
  bool operator==(const Version& other) const { return (*this <=> other) == 0; }

 private:
  std::vector<uint32_t> parts_;
};

}  // namespace gantry
