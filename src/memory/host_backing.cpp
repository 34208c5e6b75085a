#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "gantry/memory/backing.h"
#include "gantry/memory/budget.h"

namespace gantry::memory {

namespace {

class HostBacking final : public Backing {
 public:
  explicit HostBacking(uint64_t granularity) : granularity_(granularity) {}
  const std::string& name() const override { return name_; }
  const std::string& device() const override { return device_; }
  uint64_t granularity() const override { return granularity_; }
  bool host_accessible() const override { return true; }

  Result<BackingBlock> map(uint64_t bytes) override {
    if (bytes == 0 || bytes % granularity_ != 0)
      return InvalidArgument("host block of " + std::to_string(bytes) + " bytes is not a multiple of " +
                             std::to_string(granularity_));
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return ResourceExhausted("mapping a host block of " + format_bytes(bytes) +
                               " failed: " + std::strerror(errno));
    return BackingBlock{p, bytes, 0};
  }

  void unmap(const BackingBlock& block) override { ::munmap(block.base, block.size); }

 private:
  std::string name_ = "host";
  std::string device_ = "cpu";
  uint64_t granularity_;
};

}  // namespace

std::unique_ptr<Backing> make_host_backing(uint64_t granularity) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  uint64_t g = page;
  while (g < granularity) g <<= 1;
  return std::make_unique<HostBacking>(g);
}

}  // namespace gantry::memory
