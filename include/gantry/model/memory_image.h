// MemoryImage: a model's bytes in an anonymous memory file (memfd_create), never on disk.
//
// An image is filled once (create() + writable(), or copy_of()), then sealed: seal() forbids every
// further write, shrink and growth (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) and maps the
// bytes read-only. A sealed image is immutable, so a reader that maps it (llama.cpp) can never see the
// bytes change under it (a file overwritten in place can: SIGBUS).
//
// Readers that take bytes use bytes(); readers that take a path use path(), "/proc/self/fd/N": it opens
// the same memory file, in this process only, for as long as the image lives. The pages are shared memory
// of this process (they count towards its memory and its cgroup, not towards any disk).
//
// Thread-safety: a sealed image is read-only and may be shared between threads; create()'s image is
// filled by one thread before seal().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "gantry/core/status.h"

namespace gantry::model {

class MemoryImage {
 public:
  // An unsealed image of `size` bytes (zeros), named "gantry:<name>" in /proc/PID/maps. IoError naming
  // `name` when the kernel refuses (no memfd_create, out of memory).
  static Result<std::unique_ptr<MemoryImage>> create(std::string_view name, uint64_t size);
  // A sealed image holding a copy of `bytes`.
  static Result<std::shared_ptr<const MemoryImage>> copy_of(std::span<const std::byte> bytes,
                                                            std::string_view name);
  ~MemoryImage();
  MemoryImage(const MemoryImage&) = delete;
  MemoryImage& operator=(const MemoryImage&) = delete;

  // The bytes to fill before seal(); empty once sealed.
  std::span<std::byte> writable();
  // Seals the image (see above) and maps it read-only. Idempotent.
  Status seal();
  bool sealed() const { return sealed_; }

  // The bytes (read-only once sealed).
  std::span<const std::byte> bytes() const { return {data_, size_}; }
  uint64_t size() const { return size_; }
  const std::string& name() const { return name_; }
  int fd() const { return fd_; }
  // "/proc/self/fd/N": the image by path, in this process.
  std::string path() const;

 private:
  MemoryImage() = default;
  Status map(bool writable);
  void unmap();

  int fd_ = -1;
  std::byte* data_ = nullptr;
  uint64_t size_ = 0;
  bool sealed_ = false;
  std::string name_;
};

}  // namespace gantry::model
