#include <dlfcn.h>

#include <cstring>
#include <mutex>

#include "gantry/memory/backing.h"
#include "gantry/memory/budget.h"
#include "memory/cuda_api.h"

namespace gantry::memory {

namespace internal::cu {

const Driver& driver() {
  static const Driver d = [] {
    Driver out;
    void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = ::dlerror();
      out.status = Unavailable(std::string("the CUDA driver library libcuda.so.1 cannot be loaded (") +
                               (e ? e : "not found") + "); install the NVIDIA driver, or run on the CPU");
      return out;
    }
    void** slots = reinterpret_cast<void**>(&out.api);
    for (size_t i = 0; i < std::size(kSymbols); ++i) {
      slots[i] = ::dlsym(lib, kSymbols[i]);
      if (!slots[i]) {
        out.status = Unavailable(std::string("libcuda.so.1 lacks ") + kSymbols[i] +
                                 "; the NVIDIA driver is too old (Gantry needs the CUDA 11.2+ driver API)");
        return out;
      }
    }
    if (Result r = out.api.init(0); r != kSuccess) {
      const char* msg = nullptr;
      out.api.get_error_string(r, &msg);
      out.status = Unavailable("cuInit failed: " + std::string(msg ? msg : "error ") + " (" +
                               std::to_string(r) + "); no usable GPU or driver");
    }
    return out;
  }();
  return d;
}

std::string error_text(Result r) {
  const char* name = nullptr;
  const char* msg = nullptr;
  if (driver().api.get_error_name) driver().api.get_error_name(r, &name);
  if (driver().api.get_error_string) driver().api.get_error_string(r, &msg);
  return std::string(name ? name : "CUDA error") + ": " + (msg ? msg : "unknown error") + " (" +
         std::to_string(r) + ")";
}

}  // namespace internal::cu

namespace {

namespace cu = internal::cu;
using cu::driver;
using cu::error_text;

class CudaBacking final : public Backing {
 public:
  CudaBacking(int ordinal, cu::Context ctx, uint64_t granularity)
      : device_("cuda:" + std::to_string(ordinal)), ordinal_(ordinal), ctx_(ctx), granularity_(granularity) {}
  const std::string& name() const override { return name_; }
  const std::string& device() const override { return device_; }
  uint64_t granularity() const override { return granularity_; }
  bool host_accessible() const override { return false; }

  Result<BackingBlock> map(uint64_t bytes) override {
    const cu::Api& a = driver().api;
    if (bytes == 0 || bytes % granularity_ != 0)
      return InvalidArgument("CUDA block of " + std::to_string(bytes) + " bytes is not a multiple of " +
                             std::to_string(granularity_));
    a.ctx_set_current(ctx_);
    cu::AllocationProp prop = properties(ordinal_);
    cu::DevicePtr ptr = 0;
    cu::Handle handle = 0;
    if (cu::Result r = a.address_reserve(&ptr, bytes, granularity_, 0, 0); r != cu::kSuccess)
      return ResourceExhausted("reserving " + format_bytes(bytes) + " of address space on " + device_ +
                               " failed: " + error_text(r));
    if (cu::Result r = a.create(&handle, bytes, &prop, 0); r != cu::kSuccess) {
      a.address_free(ptr, bytes);
      return ResourceExhausted("allocating " + format_bytes(bytes) + " on " + device_ +
                               " failed: " + error_text(r));
    }
    if (cu::Result r = a.map(ptr, bytes, 0, handle, 0); r != cu::kSuccess) {
      a.release(handle);
      a.address_free(ptr, bytes);
      return Internal("mapping " + format_bytes(bytes) + " on " + device_ + " failed: " + error_text(r));
    }
    cu::AccessDesc access{{cu::kLocationDevice, ordinal_}, cu::kAccessReadWrite};
    if (cu::Result r = a.set_access(ptr, bytes, &access, 1); r != cu::kSuccess) {
      a.unmap(ptr, bytes);
      a.release(handle);
      a.address_free(ptr, bytes);
      return Internal("making " + format_bytes(bytes) + " on " + device_ +
                      " accessible failed: " + error_text(r));
    }
    return BackingBlock{reinterpret_cast<void*>(static_cast<uintptr_t>(ptr)), bytes, handle};
  }

  void unmap(const BackingBlock& block) override {
    const cu::Api& a = driver().api;
    a.ctx_set_current(ctx_);
    const auto ptr = static_cast<cu::DevicePtr>(reinterpret_cast<uintptr_t>(block.base));
    a.unmap(ptr, block.size);
    a.release(block.handle);
    a.address_free(ptr, block.size);
  }

  static cu::AllocationProp properties(int ordinal) {
    cu::AllocationProp prop;
    std::memset(&prop, 0, sizeof prop);
    prop.type = cu::kAllocationPinned;
    prop.location = {cu::kLocationDevice, ordinal};
    return prop;
  }

 private:
  std::string name_ = "cuda-vmm";
  std::string device_;
  int ordinal_;
  cu::Context ctx_;
  uint64_t granularity_;
};

}  // namespace

Result<std::unique_ptr<Backing>> make_cuda_backing(int ordinal) {
  const cu::Driver& d = cu::driver();
  if (!d.status.ok()) return d.status;
  const cu::Api& a = d.api;
  cu::Device dev = 0;
  if (cu::Result r = a.device_get(&dev, ordinal); r != cu::kSuccess)
    return Unavailable("no CUDA device " + std::to_string(ordinal) + ": " + error_text(r));
  int vmm = 0;
  if (a.device_get_attribute(&vmm, cu::kAttrVmmSupported, dev) != cu::kSuccess || !vmm)
    return Unavailable("CUDA device " + std::to_string(ordinal) +
                       " does not support the virtual-memory API (cuMemCreate/cuMemMap)");
  cu::Context ctx = nullptr;
  if (cu::Result r = a.primary_ctx_retain(&ctx, dev); r != cu::kSuccess)
    return Unavailable("cannot retain the primary context of cuda:" + std::to_string(ordinal) + ": " +
                       error_text(r));
  const cu::AllocationProp prop = CudaBacking::properties(ordinal);
  size_t granularity = 0;
  if (cu::Result r = a.get_granularity(&granularity, &prop, cu::kGranularityMinimum);
      r != cu::kSuccess || granularity == 0)
    return Unavailable("cannot read the allocation granularity of cuda:" + std::to_string(ordinal) + ": " +
                       error_text(r));
  return std::unique_ptr<Backing>(std::make_unique<CudaBacking>(ordinal, ctx, granularity));
}

namespace {

// make_cuda_backing on the first block asked for: a process that never allocates there never loads the
// driver or creates a context on the device.
class LazyCudaBacking final : public Backing {
 public:
  explicit LazyCudaBacking(int ordinal) : ordinal_(ordinal), device_("cuda:" + std::to_string(ordinal)) {}
  const std::string& name() const override { return name_; }
  const std::string& device() const override { return device_; }
  uint64_t granularity() const override {
    const Backing* b = real();
    return b ? b->granularity() : kDefaultGranularity;
  }
  bool host_accessible() const override { return false; }
  Result<BackingBlock> map(uint64_t bytes) override {
    Backing* b = real();
    if (!b) return status_;
    return b->map(bytes);
  }
  void unmap(const BackingBlock& block) override {
    if (Backing* b = real()) b->unmap(block);
  }

 private:
  static constexpr uint64_t kDefaultGranularity = 2ull << 20;
  Backing* real() const {
    std::call_once(once_, [this] {
      auto r = make_cuda_backing(ordinal_);
      if (r.ok())
        real_ = std::move(r).value();
      else
        status_ = r.status();
    });
    return real_.get();
  }
  std::string name_ = "cuda-vmm";
  int ordinal_;
  std::string device_;
  mutable std::once_flag once_;
  mutable std::unique_ptr<Backing> real_;
  mutable Status status_;
};

}  // namespace

std::unique_ptr<Backing> make_lazy_cuda_backing(int ordinal) {
  return std::make_unique<LazyCudaBacking>(ordinal);
}

}  // namespace gantry::memory
