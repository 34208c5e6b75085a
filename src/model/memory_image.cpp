#include "gantry/model/memory_image.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gantry::model {

Result<std::unique_ptr<MemoryImage>> MemoryImage::create(std::string_view name, uint64_t size) {
  std::unique_ptr<MemoryImage> img(new MemoryImage());
  img->name_ = std::string(name);
  // The kernel truncates memfd names to 249 bytes; a long URL only loses its tail in /proc/PID/maps.
  const std::string label = "gantry:" + std::string(name.substr(0, 200));
  img->fd_ = ::memfd_create(label.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (img->fd_ < 0)
    return IoError("cannot create an in-memory file for " + std::string(name) + ": " + std::strerror(errno));
  if (::ftruncate(img->fd_, static_cast<off_t>(size)) != 0)
    return IoError("cannot size the in-memory file for " + std::string(name) + " to " + std::to_string(size) +
                   " bytes: " + std::strerror(errno));
  img->size_ = size;
  GANTRY_RETURN_IF_ERROR(img->map(true));
  return img;
}

Result<std::shared_ptr<const MemoryImage>> MemoryImage::copy_of(std::span<const std::byte> bytes,
                                                                std::string_view name) {
  GANTRY_ASSIGN_OR_RETURN(std::unique_ptr<MemoryImage> img, create(name, bytes.size()));
  if (!bytes.empty()) std::memcpy(img->writable().data(), bytes.data(), bytes.size());
  GANTRY_RETURN_IF_ERROR(img->seal());
  return std::shared_ptr<const MemoryImage>(std::move(img));
}

MemoryImage::~MemoryImage() {
  unmap();
  if (fd_ >= 0) ::close(fd_);
}

std::span<std::byte> MemoryImage::writable() {
  if (sealed_) return {};
  return {data_, size_};
}

Status MemoryImage::map(bool writable) {
  if (size_ == 0) return Status::Ok();  // nothing to map: bytes() is empty
  void* p = ::mmap(nullptr, size_, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED)
    return IoError("cannot map the in-memory file for " + name_ + " (" + std::to_string(size_) +
                   " bytes): " + std::strerror(errno));
  data_ = static_cast<std::byte*>(p);
  return Status::Ok();
}

void MemoryImage::unmap() {
  if (data_ != nullptr) ::munmap(data_, size_);
  data_ = nullptr;
}

Status MemoryImage::seal() {
  if (sealed_) return Status::Ok();
  // F_SEAL_WRITE is refused while a writable shared mapping exists: drop ours first.
  unmap();
  if (::fcntl(fd_, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    return IoError("cannot seal the in-memory file for " + name_ + ": " + std::strerror(errno));
  sealed_ = true;
  return map(false);
}

std::string MemoryImage::path() const { return "/proc/self/fd/" + std::to_string(fd_); }

}  // namespace gantry::model
