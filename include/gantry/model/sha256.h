// SHA-256 digests (OpenSSL) as 64 lower-case hex digits.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "gantry/core/status.h"

namespace gantry::model {

std::string sha256_hex(std::string_view bytes);

// SHA-256 of bytes given piece by piece (a download verified as it arrives).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  Status update(std::string_view bytes);
  // The digest of everything given; the hasher is spent afterwards.
  Result<std::string> hex();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

// Streams the file through SHA-256. NotFound when missing; IoError when unreadable.
Result<std::string> sha256_file(const std::filesystem::path& path);

}  // namespace gantry::model
