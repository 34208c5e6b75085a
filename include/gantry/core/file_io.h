// Whole-file reads and writes with errors that name the file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "gantry/core/status.h"

namespace gantry {

// Reads a regular file into memory. NotFound when missing, InvalidArgument for a directory or a file larger
// than max_bytes, IoError when the OS refuses.
Result<std::string> read_file(const std::filesystem::path& path, uint64_t max_bytes = UINT64_MAX);

// Writes `bytes` to `path`, replacing it: written to a temporary file beside it, then renamed.
Status write_file(const std::filesystem::path& path, std::string_view bytes);

}  // namespace gantry
