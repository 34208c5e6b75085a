// The one way Gantry opens, reads and writes files named by users, packages and archives.
//
// Reading: open_for_read() never blocks on a FIFO or a device (O_NONBLOCK), checks with fstat() that it
// got a regular file, and can refuse symlinks (O_NOFOLLOW, for files inside a package). Writing:
// AtomicFile creates a fresh temporary file beside the target with O_CREAT|O_EXCL|O_NOFOLLOW (never
// through a planted symlink, never shared by two writers), and commit() fsyncs it and renames it over
// the target (a symlink at the target is replaced, not followed). Every error names the file and the
// real cause, and no std::filesystem exception escapes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

#include "gantry/core/status.h"

namespace gantry {

// An owned file descriptor, closed on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset();

 private:
  int fd_ = -1;
};

struct ReadOptions {
  uint64_t max_bytes = UINT64_MAX;  // read_file(): InvalidArgument beyond this
  bool no_follow = false;           // refuse a symlink as the last component (files inside a package)
  bool allow_char_device = false;   // e.g. /dev/stdin; FIFOs, sockets and block devices never
};

// Opens an existing file for reading. NotFound when missing; InvalidArgument "<path>: is a FIFO, not a
// regular file" (directory, socket, ...) for anything but a regular file; IoError with strerror otherwise.
Result<UniqueFd> open_for_read(const std::filesystem::path& path, const ReadOptions& options = {});

// Reads a whole file (opened as above) into memory; InvalidArgument when it holds more than max_bytes.
// Reads to end of file rather than trusting st_size (sysfs and procfs report sizes they do not hold).
Result<std::string> read_file(const std::filesystem::path& path, const ReadOptions& options);
inline Result<std::string> read_file(const std::filesystem::path& path, uint64_t max_bytes = UINT64_MAX) {
  return read_file(path, ReadOptions{.max_bytes = max_bytes});
}

// Up to `n` bytes from the start of a regular file (fewer when it is shorter).
Result<std::string> read_prefix(const std::filesystem::path& path, size_t n);

// Reads from `fd` until `buf` is full or end of file; retries EINTR. Returns the count, or IoError naming
// `label`.
Result<size_t> read_some(int fd, std::span<std::byte> buf, std::string_view label);

// What a path is, following symlinks, without throwing: NotFound when nothing is there; IoError naming the
// path for a symlink loop, a permission problem or a too-long name.
Result<std::filesystem::file_type> file_type_of(const std::filesystem::path& path);

// "is a FIFO", "is a directory", ... for messages about a file of the wrong kind.
std::string_view file_type_name(std::filesystem::file_type type);

// A file being written: a unique temporary beside `target`, renamed over it by commit(). Dropped (not
// committed) it is removed. While it exists its path is in the signal cleanup registry, so SIGINT/SIGTERM
// remove it too.
class AtomicFile {
 public:
  static Result<AtomicFile> create(const std::filesystem::path& target);
  AtomicFile(AtomicFile&& o) noexcept;
  AtomicFile& operator=(AtomicFile&&) = delete;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  Status write(std::span<const std::byte> bytes);
  Status write(std::string_view bytes) { return write(std::as_bytes(std::span(bytes.data(), bytes.size()))); }
  // fsync, close, rename over the target. After an error the temporary file is gone.
  Status commit();

  int fd() const { return fd_.get(); }
  const std::filesystem::path& temp_path() const { return temp_; }
  const std::filesystem::path& target() const { return target_; }

 private:
  AtomicFile() = default;
  void discard();

  std::filesystem::path target_;
  std::filesystem::path temp_;
  UniqueFd fd_;
  int cleanup_slot_ = -1;
};

// Creates `path`, which must not exist yet (O_EXCL|O_NOFOLLOW), for writing. InvalidArgument "already
// exists" on EEXIST.
Result<UniqueFd> create_new_file(const std::filesystem::path& path, unsigned mode = 0666);

// Writes `bytes` to `path` through an AtomicFile.
Status write_file(const std::filesystem::path& path, std::string_view bytes);

// Copies the regular file `from` to `to` through an AtomicFile (a symlink at `to` is replaced).
Status copy_regular_file(const std::filesystem::path& from, const std::filesystem::path& to);

// A safe, visible file name for an untrusted name (e.g. a model's output name): ASCII letters, digits,
// '-', '_' and '.' are kept, every other byte becomes '_', a leading '.' becomes '_' (no hidden files,
// no '.' or '..'), at most 200 bytes, "output" when empty.
std::string safe_file_name(std::string_view name);

}  // namespace gantry
