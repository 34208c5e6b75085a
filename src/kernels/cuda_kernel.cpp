#include "kernels/cuda_kernel.h"

#include "gantry/kernels/compile.h"
#include "gantry/memory/backing.h"

namespace gantry::kernels::internal {

namespace {

// Errors after which the CUDA context is unusable until the process ends (CUDA's "sticky" errors).
bool sticky(cu::Result r) {
  return r == 700 /* ILLEGAL_ADDRESS */ || r == 702 /* LAUNCH_TIMEOUT */ || (r >= 714 && r <= 719) ||
         r == 999 /* UNKNOWN */;
}

uint64_t dptr(const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

}  // namespace

Result<std::unique_ptr<CudaDevice>> CudaDevice::open(int ordinal, const hw::Device* device,
                                                     memory::BlockPool* pool) {
  const cu::Driver& d = cu::driver();
  const std::string id = "cuda:" + std::to_string(ordinal);
  if (!d.status.ok()) return d.status.with_context("CUDA kernels are unavailable on " + id);
  const cu::Api& a = d.api;
  int count = 0;
  a.device_get_count(&count);
  if (ordinal < 0 || ordinal >= count)
    return Unavailable("no CUDA device " + id + ": the driver sees " + std::to_string(count) + " GPU(s)");
  cu::Device dev = 0;
  if (cu::Result r = a.device_get(&dev, ordinal); r != cu::kSuccess)
    return Unavailable("no CUDA device " + id + ": " + cu::error_text(r));
  cu::Context ctx = nullptr;
  if (cu::Result r = a.primary_ctx_retain(&ctx, dev); r != cu::kSuccess)
    return Unavailable("cannot retain the primary context of " + id + ": " + cu::error_text(r));
  std::string arch;
  if (device && device->compute_capability) {
    auto from_registry = cuda_arch_for(*device);
    if (from_registry.ok()) arch = *from_registry;
  }
  if (arch.empty()) {
    int major = 0, minor = 0;
    a.device_get_attribute(&major, cu::kAttrComputeCapabilityMajor, dev);
    a.device_get_attribute(&minor, cu::kAttrComputeCapabilityMinor, dev);
    hw::Device fake;
    fake.id = id;
    fake.compute_capability = std::to_string(major) + "." + std::to_string(minor);
    GANTRY_ASSIGN_OR_RETURN(arch, cuda_arch_for(fake));
  }
  int max_shared = 48 * 1024;
  a.device_get_attribute(&max_shared, cu::kAttrMaxSharedPerBlockOptin, dev);
  return std::unique_ptr<CudaDevice>(new CudaDevice(ordinal, ctx, arch, pool, max_shared));
}

CudaDevice::CudaDevice(int ordinal, cu::Context ctx, std::string arch, memory::BlockPool* pool,
                       int max_dynamic_shared)
    : ordinal_(ordinal),
      id_("cuda:" + std::to_string(ordinal)),
      ctx_(ctx),
      arch_(std::move(arch)),
      pool_(pool),
      max_dynamic_shared_(max_dynamic_shared) {}

CudaDevice::~CudaDevice() = default;

Status CudaDevice::usable() const {
  std::lock_guard lock(mu_);
  return lost_;
}

Status CudaDevice::check(cu::Result r, const std::string& what) {
  if (r == cu::kSuccess) return Status::Ok();
  const std::string text = what + " on " + id_ + " failed: " + cu::error_text(r);
  if (sticky(r)) {
    std::lock_guard lock(mu_);
    lost_ =
        FailedPrecondition(text +
                           "; the CUDA context of this device is lost (a kernel faulted) and stays unusable "
                           "until the process restarts; the CPU and other devices still work");
    return lost_;
  }
  return Internal(text);
}

Result<cu::Module> CudaDevice::load_module(const std::string& cubin, const std::string& symbol,
                                           cu::Function& function, CudaFunctionInfo& info) {
  GANTRY_RETURN_IF_ERROR(usable());
  const cu::Api& a = cu::driver().api;
  a.ctx_set_current(ctx_);
  cu::Module module = nullptr;
  if (cu::Result r = a.module_load_data_ex(&module, cubin.data(), 0, nullptr, nullptr); r != cu::kSuccess)
    return check(r, "loading the kernel's cubin (" + arch_ + ")");
  if (cu::Result r = a.module_get_function(&function, module, symbol.c_str()); r != cu::kSuccess) {
    a.module_unload(module);
    return NotFound("the cubin has no kernel '" + symbol + "' (" + cu::error_text(r) + ")");
  }
  int v = 0;
  if (a.func_get_attribute(&v, cu::kFuncNumRegs, function) == cu::kSuccess) info.registers = v;
  if (a.func_get_attribute(&v, cu::kFuncSharedSizeBytes, function) == cu::kSuccess) info.static_shared = v;
  if (a.func_get_attribute(&v, cu::kFuncLocalSizeBytes, function) == cu::kSuccess) info.local = v;
  if (a.func_get_attribute(&v, cu::kFuncMaxThreadsPerBlock, function) == cu::kSuccess) info.max_threads = v;
  return module;
}

void CudaDevice::unload_module(cu::Module module) {
  const cu::Api& a = cu::driver().api;
  a.ctx_set_current(ctx_);
  a.module_unload(module);
}

Status CudaDevice::launch(cu::Function f, const uint32_t grid[3], const uint32_t block[3], uint64_t shared,
                          void* stream, void** params, const std::string& entry) {
  GANTRY_RETURN_IF_ERROR(usable());
  const cu::Api& a = cu::driver().api;
  a.ctx_set_current(ctx_);
  if (shared > static_cast<uint64_t>(max_dynamic_shared_))
    return InvalidArgument("kernel " + entry + " asks for " + std::to_string(shared) +
                           " bytes of dynamic shared memory; " + id_ + " allows " +
                           std::to_string(max_dynamic_shared_) + " per block");
  if (shared > 48 * 1024)  // beyond 48 KiB a kernel must opt in
    GANTRY_RETURN_IF_ERROR(
        check(a.func_set_attribute(f, cu::kFuncMaxDynamicSharedBytes, static_cast<int>(shared)),
              "raising the dynamic shared memory limit of " + entry));
  const cu::Result r =
      a.launch_kernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                      static_cast<unsigned>(shared), static_cast<cu::Stream>(stream), params, nullptr);
  return check(r, "launching kernel " + entry);
}

Status CudaDevice::synchronize() {
  GANTRY_RETURN_IF_ERROR(usable());
  const cu::Api& a = cu::driver().api;
  a.ctx_set_current(ctx_);
  return check(a.ctx_synchronize(), "waiting for the kernels");
}

Status CudaDevice::pool_ready() {
  if (pool_) return Status::Ok();
  if (!own_pool_) {
    auto backing = memory::make_cuda_backing(ordinal_);
    if (!backing.ok()) return backing.status().with_context("device memory for kernels on " + id_);
    own_pool_ = std::make_unique<memory::BlockPool>(std::move(*backing));
  }
  pool_ = own_pool_.get();
  return Status::Ok();
}

Result<void*> CudaDevice::allocate(uint64_t bytes) {
  GANTRY_RETURN_IF_ERROR(usable());
  GANTRY_RETURN_IF_ERROR(pool_ready());
  GANTRY_ASSIGN_OR_RETURN(void* p, pool_->allocate(bytes));
  if (p) {
    const cu::Api& a = cu::driver().api;
    a.ctx_set_current(ctx_);
    GANTRY_RETURN_IF_ERROR(check(a.memset_d8(dptr(p), 0, bytes), "zeroing a new tensor"));
  }
  return p;
}

Status CudaDevice::free(void* p) {
  if (!pool_) return InvalidArgument("no memory was allocated on " + id_);
  return pool_->free(p);
}

Status CudaDevice::copy_to_device(void* dst, const void* src, uint64_t bytes) {
  GANTRY_RETURN_IF_ERROR(usable());
  const cu::Api& a = cu::driver().api;
  a.ctx_set_current(ctx_);
  return check(a.memcpy_htod(dptr(dst), src, bytes),
               "copying " + std::to_string(bytes) + " bytes to the device");
}

Status CudaDevice::copy_to_host(void* dst, const void* src, uint64_t bytes) {
  GANTRY_RETURN_IF_ERROR(usable());
  const cu::Api& a = cu::driver().api;
  a.ctx_set_current(ctx_);
  return check(a.memcpy_dtoh(dst, dptr(src), bytes),
               "copying " + std::to_string(bytes) + " bytes to the host");
}

}  // namespace gantry::kernels::internal
