// The on-disk kernel cache (see compile.h for the contract). An entry is one file:
//   "GANTRYK1" | u64 key length | key | u64 log length | log | u64 payload length | payload | u64 checksum
// (lengths little-endian, checksum = FNV-1a 64 of everything before it). read() returns nothing for an
// entry that is missing, truncated, has another key (a hash collision) or a bad checksum: the caller
// compiles again and write() replaces it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "gantry/core/status.h"

namespace gantry::kernels::internal {

uint64_t fnv1a64(std::string_view data, uint64_t seed = 0xcbf29ce484222325ull);
// 32 hex digits: two FNV-1a 64 hashes of `text` with different seeds (a file name, not a security hash:
// the full key inside the entry decides).
std::string key_hash(std::string_view text);

struct CacheEntry {
  std::string log;
  std::string payload;
};

class KernelCache {
 public:
  explicit KernelCache(std::filesystem::path dir) : dir_(std::move(dir)) {}
  const std::filesystem::path& dir() const { return dir_; }
  // <dir>/<key_hash(key)><suffix>
  std::filesystem::path path_for(std::string_view key, std::string_view suffix) const;
  std::optional<CacheEntry> read(std::string_view key, std::string_view suffix) const;
  // Atomic (core's AtomicFile: a temporary file beside the entry, fsynced and renamed over it); creates
  // dir() when missing.
  Status write(std::string_view key, std::string_view suffix, const CacheEntry& entry) const;

 private:
  std::filesystem::path dir_;
};

}  // namespace gantry::kernels::internal
