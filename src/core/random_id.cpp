#include "gantry/core/random_id.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gantry {

void secure_random_bytes(std::span<unsigned char> out) {
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::getrandom(out.data() + done, out.size() - done, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    // ENOSYS (a kernel before 3.17) or a seccomp filter: ids would be guessable, so refuse to go on.
    std::fprintf(stderr, "gantry: getrandom(2) failed (%s): no secure random source for ids\n",
                 std::strerror(errno));
    std::abort();
  }
}

std::string random_hex_id(std::string_view prefix) {
  static constexpr char kHex[] = "0123456789abcdef";
  unsigned char bytes[kRandomHexIdDigits / 2];
  secure_random_bytes(bytes);
  std::string id(prefix);
  id.reserve(prefix.size() + kRandomHexIdDigits);
  for (unsigned char b : bytes) {
    id += kHex[b >> 4];
    id += kHex[b & 15];
  }
  return id;
}

std::string random_base62_id(std::string_view prefix) {
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  constexpr unsigned kAccept =
      248;  // 4 * 62: bytes below it map to a character uniformly, the rest are drawn again
  std::string id(prefix);
  id.reserve(prefix.size() + kRandomBase62IdChars);
  unsigned char bytes[32];  // 24 characters need 24 bytes 97% of the time; more are drawn when short
  size_t used = sizeof bytes;
  while (id.size() < prefix.size() + kRandomBase62IdChars) {
    if (used == sizeof bytes) {
      secure_random_bytes(bytes);
      used = 0;
    }
    const unsigned b = bytes[used++];
    if (b < kAccept) id += kChars[b % 62];
  }
  return id;
}

}  // namespace gantry
