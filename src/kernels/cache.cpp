#include "kernels/cache.h"

#include <cstdio>
#include <system_error>

#include "gantry/core/file_io.h"

namespace gantry::kernels::internal {

namespace {

constexpr std::string_view kMagic = "GANTRYK1";

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

bool get_u64(std::string_view in, size_t& pos, uint64_t& v) {
  if (in.size() - pos < 8) return false;
  v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<unsigned char>(in[pos + i])} << (8 * i);
  pos += 8;
  return true;
}

bool get_bytes(std::string_view in, size_t& pos, std::string& out) {
  uint64_t n = 0;
  if (!get_u64(in, pos, n) || n > in.size() - pos) return false;
  out.assign(in.substr(pos, n));
  pos += n;
  return true;
}

}  // namespace

uint64_t fnv1a64(std::string_view data, uint64_t seed) {
  uint64_t h = seed;
  for (unsigned char c : data) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string key_hash(std::string_view text) {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(fnv1a64(text)),
                static_cast<unsigned long long>(fnv1a64(text, 0x84222325cbf29ce4ull)));
  return buf;
}

std::filesystem::path KernelCache::path_for(std::string_view key, std::string_view suffix) const {
  return dir_ / (key_hash(key) + std::string(suffix));
}

std::optional<CacheEntry> KernelCache::read(std::string_view key, std::string_view suffix) const {
  auto bytes = read_file(path_for(key, suffix), uint64_t{1} << 30);
  if (!bytes.ok()) return std::nullopt;
  const std::string_view in = *bytes;
  if (in.size() < kMagic.size() + 8 || in.substr(0, kMagic.size()) != kMagic) return std::nullopt;
  size_t pos = kMagic.size();
  std::string stored_key;
  CacheEntry e;
  uint64_t checksum = 0;
  if (!get_bytes(in, pos, stored_key) || !get_bytes(in, pos, e.log) || !get_bytes(in, pos, e.payload))
    return std::nullopt;
  const size_t body = pos;
  if (!get_u64(in, pos, checksum) || pos != in.size()) return std::nullopt;
  if (stored_key != key || checksum != fnv1a64(in.substr(0, body))) return std::nullopt;
  return e;
}

Status KernelCache::write(std::string_view key, std::string_view suffix, const CacheEntry& entry) const {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec)
    return IoError("cannot create the kernel cache directory " + dir_.string() + ": " + ec.message() +
                   " (set GANTRY_KERNEL_CACHE to a writable directory)");
  std::string out(kMagic);
  for (std::string_view part : {key, std::string_view(entry.log), std::string_view(entry.payload)}) {
    put_u64(out, part.size());
    out.append(part);
  }
  put_u64(out, fnv1a64(out));
  return write_file(path_for(key, suffix), out);
}

}  // namespace gantry::kernels::internal
