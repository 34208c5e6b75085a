// Plain (uncompressed) tar archives for model packages, through libarchive.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::model {

// One member of an archive: its name inside the archive ('/'-separated, relative) and either a file on disk
// or literal contents.
struct TarMember {
  std::string name;
  std::filesystem::path source;         // used when contents is empty
  std::optional<std::string> contents;  // written as-is when set
};

// Writes a ustar/pax archive holding `members` (regular files, mode 0644, mtime 0 for reproducible bytes).
Status write_tar(const std::filesystem::path& archive, const std::vector<TarMember>& members);

// Extracts `archive` into the existing directory `destination`. Only regular files and directories are
// accepted; an absolute name, a '..' component, a symlink, a hard link or a device entry is refused with an
// InvalidArgument error naming the entry, and a truncated or corrupt archive is a Corrupt error.
Status extract_tar(const std::filesystem::path& archive, const std::filesystem::path& destination);

}  // namespace gantry::model
