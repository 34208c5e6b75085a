// SHA-256 digests (OpenSSL) as 64 lower-case hex digits.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "gantry/core/status.h"

namespace gantry::model {

std::string sha256_hex(std::string_view bytes);

// Streams the file through SHA-256. NotFound when missing; IoError when unreadable.
Result<std::string> sha256_file(const std::filesystem::path& path);

}  // namespace gantry::model
