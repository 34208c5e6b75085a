#include "gantry/core/file_io.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <system_error>
#include <utility>
#include <vector>

#include "gantry/core/cleanup_registry.h"

namespace gantry {
namespace fs = std::filesystem;
namespace {

std::string kind_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

Status open_error(const fs::path& path, int err, const ReadOptions& options) {
  const std::string p = path.string();
  if (err == ENOENT || err == ENOTDIR) return NotFound(p + ": no such file");
  if (err == ELOOP && options.no_follow)
    return InvalidArgument(p + ": is a symbolic link, which is not followed here; copy the file in instead");
  if (err == ELOOP) return IoError(p + ": too many levels of symbolic links (a symlink loop?)");
  if (err == EISDIR) return InvalidArgument(p + ": is a directory, not a regular file");
  return IoError(p + ": cannot open: " + std::strerror(err));
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.release();
  }
  return *this;
}

void UniqueFd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Result<UniqueFd> open_for_read(const fs::path& path, const ReadOptions& options) {
  // O_NONBLOCK: opening a FIFO with no writer, or a device, must not hang; the type check follows.
  int flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
  if (options.no_follow) flags |= O_NOFOLLOW;
  int fd;
  do {
    fd = ::open(path.c_str(), flags);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return open_error(path, errno, options);
  UniqueFd owned(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return IoError(path.string() + ": cannot stat: " + std::strerror(errno));
  const bool ok = S_ISREG(st.st_mode) || (options.allow_char_device && S_ISCHR(st.st_mode));
  if (!ok) {
    const std::string kind = kind_name(st.st_mode);
    return InvalidArgument(path.string() + ": is " + kind + ", not a regular file");
  }
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > options.max_bytes)
    return InvalidArgument(path.string() + ": file of " + std::to_string(st.st_size) +
                           " bytes exceeds the limit of " + std::to_string(options.max_bytes) + " bytes");
  // Reads from here on behave as usual (blocking), now that the file is known to be one we may read.
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) (void)::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  return owned;
}

Result<size_t> read_some(int fd, std::span<std::byte> buf, std::string_view label) {
  size_t got = 0;
  while (got < buf.size()) {
    const ssize_t n = ::read(fd, buf.data() + got, buf.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError(std::string(label) + ": read failed: " + std::strerror(errno));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  return got;
}

Result<std::string> read_file(const fs::path& path, const ReadOptions& options) {
  GANTRY_ASSIGN_OR_RETURN(UniqueFd fd, open_for_read(path, options));
  struct stat st {};
  const size_t hint = ::fstat(fd.get(), &st) == 0 && st.st_size > 0 ? static_cast<size_t>(st.st_size) : 0;
  std::string out;
  out.reserve(std::min<uint64_t>(hint, options.max_bytes) + 1);
  char buf[1 << 16];
  while (true) {
    GANTRY_ASSIGN_OR_RETURN(size_t n,
                            read_some(fd.get(), std::as_writable_bytes(std::span(buf)), path.string()));
    if (n == 0) break;
    if (out.size() + n > options.max_bytes)
      return InvalidArgument(path.string() + ": holds more than the limit of " +
                             std::to_string(options.max_bytes) + " bytes");
    out.append(buf, n);
    if (n < sizeof buf) break;
  }
  return out;
}

Result<std::string> read_prefix(const fs::path& path, size_t n) {
  GANTRY_ASSIGN_OR_RETURN(UniqueFd fd, open_for_read(path));
  std::string out(n, '\0');
  GANTRY_ASSIGN_OR_RETURN(
      size_t got, read_some(fd.get(), std::as_writable_bytes(std::span(out.data(), n)), path.string()));
  out.resize(got);
  return out;
}

std::string_view file_type_name(fs::file_type type) {
  switch (type) {
    case fs::file_type::regular:
      return "is a regular file";
    case fs::file_type::directory:
      return "is a directory";
    case fs::file_type::fifo:
      return "is a FIFO";
    case fs::file_type::socket:
      return "is a socket";
    case fs::file_type::block:
      return "is a block device";
    case fs::file_type::character:
      return "is a character device";
    case fs::file_type::symlink:
      return "is a symbolic link";
    default:
      return "is of an unknown kind";
  }
}

Result<fs::file_type> file_type_of(const fs::path& path) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found) return NotFound(path.string() + ": no such file or directory");
  if (ec) {
    if (ec.value() == ELOOP)
      return IoError(path.string() + ": too many levels of symbolic links (a symlink loop?)");
    return IoError(path.string() + ": " + ec.message());
  }
  return st.type();
}

namespace {

// 12 random hex digits for a temporary name; getrandom() where it works, else time and a counter.
std::string random_suffix() {
  static std::atomic<uint64_t> counter{0};
  uint64_t bits = 0;
  if (::getrandom(&bits, sizeof bits, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof bits))
    bits = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
           (static_cast<uint64_t>(::getpid()) << 32) ^ counter.fetch_add(1) * 0x9E3779B97F4A7C15ull;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 12; ++i, bits >>= 4) s += kHex[bits & 0xF];
  return s;
}

int open_exclusive(const fs::path& path, unsigned mode) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

}  // namespace

Result<UniqueFd> create_new_file(const fs::path& path, unsigned mode) {
  const int fd = open_exclusive(path, mode);
  if (fd >= 0) return UniqueFd(fd);
  const int err = errno;
  if (err == EEXIST) return InvalidArgument(path.string() + ": already exists");
  return IoError(path.string() + ": cannot create: " + std::strerror(err));
}

Result<AtomicFile> AtomicFile::create(const fs::path& target) {
  if (target.filename().empty()) return InvalidArgument(target.string() + ": not a file name");
  AtomicFile f;
  f.target_ = target;
  for (int attempt = 0; attempt < 100; ++attempt) {
    fs::path tmp = target;
    tmp += ".tmp-" + random_suffix();
    const int fd = open_exclusive(tmp, 0666);  // the umask applies, as for any new file
    if (fd >= 0) {
      f.temp_ = std::move(tmp);
      f.fd_ = UniqueFd(fd);
      f.cleanup_slot_ = register_cleanup_path(fs::absolute(f.temp_));
      return f;
    }
    if (errno != EEXIST)
      return IoError(target.string() + ": cannot create a temporary file beside it: " + std::strerror(errno));
  }
  return IoError(target.string() + ": cannot create a unique temporary file beside it");
}

AtomicFile::AtomicFile(AtomicFile&& o) noexcept
    : target_(std::move(o.target_)),
      temp_(std::move(o.temp_)),
      fd_(std::move(o.fd_)),
      cleanup_slot_(std::exchange(o.cleanup_slot_, -1)) {
  o.temp_.clear();
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() {
  fd_.reset();
  if (!temp_.empty()) ::unlink(temp_.c_str());
  temp_.clear();
  unregister_cleanup_path(cleanup_slot_);
  cleanup_slot_ = -1;
}

Status AtomicFile::write(std::span<const std::byte> bytes) {
  if (fd_.get() < 0) return FailedPrecondition(target_.string() + ": write after commit or failure");
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_.get(), bytes.data(), std::min<size_t>(bytes.size(), 1u << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      discard();
      return IoError(target_.string() + ": write failed: " + std::strerror(err));
    }
    bytes = bytes.subspan(static_cast<size_t>(n));
  }
  return Status::Ok();
}

Status AtomicFile::commit() {
  if (fd_.get() < 0) return FailedPrecondition(target_.string() + ": commit after commit or failure");
  if (::fsync(fd_.get()) != 0) {
    const int err = errno;
    discard();
    return IoError(target_.string() + ": cannot flush to disk: " + std::strerror(err));
  }
  if (::close(fd_.release()) != 0) {
    const int err = errno;
    discard();
    return IoError(target_.string() + ": write failed on close: " + std::strerror(err));
  }
  // rename() replaces whatever is at the target, a symlink included, without following it.
  if (::rename(temp_.c_str(), target_.c_str()) != 0) {
    const int err = errno;  // before discard() can change errno
    discard();
    return IoError(target_.string() + ": cannot replace: " + std::strerror(err));
  }
  temp_.clear();
  discard();
  return Status::Ok();
}

Status write_file(const fs::path& path, std::string_view bytes) {
  GANTRY_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::create(path));
  GANTRY_RETURN_IF_ERROR(f.write(bytes));
  return f.commit();
}

Status copy_regular_file(const fs::path& from, const fs::path& to) {
  GANTRY_ASSIGN_OR_RETURN(UniqueFd in, open_for_read(from));
  GANTRY_ASSIGN_OR_RETURN(AtomicFile out, AtomicFile::create(to));
  std::vector<std::byte> buf(1 << 20);
  while (true) {
    GANTRY_ASSIGN_OR_RETURN(size_t n, read_some(in.get(), buf, from.string()));
    GANTRY_RETURN_IF_ERROR(out.write(std::span(buf.data(), n)));
    if (n < buf.size()) break;
  }
  return out.commit();
}

std::string safe_file_name(std::string_view name) {
  std::string s;
  for (char c : name.substr(0, 200)) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_' || (c == '.' && !s.empty());
    s += keep ? c : '_';
  }
  return s.empty() ? "output" : s;
}

}  // namespace gantry
