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

class CudaDevice::Kernel final : public DeviceKernel {
 public:
  Kernel(cu::Context ctx, cu::Module module, cu::Function function)
      : ctx_(ctx), module_(module), function_(function) {}
  ~Kernel() override {
    const cu::Api& a = cu::driver().api;
    a.ctx_set_current(ctx_);
    a.module_unload(module_);
  }
  cu::Function function() const { return function_; }

 private:
  cu::Context ctx_;
  cu::Module module_;
  cu::Function function_;
};

Result<std::unique_ptr<DeviceKernel>> CudaDevice::load(std::string_view source, KernelInfo info,
                                                       const std::string& source_name,
                                                       const KernelOptions& options,
                                                       const std::filesystem::path& cache_dir) {
  GANTRY_RETURN_IF_ERROR(usable());
  CudaCompileOptions copts;
  copts.arch = options.arch.empty() ? arch_ : options.arch;
  copts.flags = options.flags;
  copts.source_name = source_name;
  copts.cache_dir = cache_dir;
  copts.use_cache = options.use_cache;
  GANTRY_ASSIGN_OR_RETURN(auto bin, compile_cuda(source, info.entry, copts));

  const cu::Api& a = cu::driver().api;
  a.ctx_set_current(ctx_);
  cu::Module module = nullptr;
  if (cu::Result r = a.module_load_data_ex(&module, bin.binary.data(), 0, nullptr, nullptr);
      r != cu::kSuccess)
    return check(r, "loading the kernel's cubin (" + copts.arch + ")");
  cu::Function function = nullptr;
  if (cu::Result r = a.module_get_function(&function, module, bin.lowered_name.c_str()); r != cu::kSuccess) {
    a.module_unload(module);
    return NotFound("the cubin has no kernel '" + bin.lowered_name + "' (" + cu::error_text(r) + ")");
  }
  auto k = std::make_unique<Kernel>(ctx_, module, function);
  int v = 0;
  if (a.func_get_attribute(&v, cu::kFuncNumRegs, function) == cu::kSuccess) info.registers = v;
  if (a.func_get_attribute(&v, cu::kFuncSharedSizeBytes, function) == cu::kSuccess)
    info.static_shared_bytes = v;
  if (a.func_get_attribute(&v, cu::kFuncLocalSizeBytes, function) == cu::kSuccess) info.local_bytes = v;
  if (a.func_get_attribute(&v, cu::kFuncMaxThreadsPerBlock, function) == cu::kSuccess)
    info.max_threads_per_block = v;
  int min_grid = 0, block = 0;
  if (a.occupancy_max_potential_block_size(&min_grid, &block, function, nullptr, 0, 0) == cu::kSuccess &&
      block > 0)
    info.preferred_block_size = block;
  else
    info.preferred_block_size = info.max_threads_per_block;
  info.target = bin.arch + " (" + bin.compiler + ")";
  info.binary_bytes = bin.binary.size();
  info.compile_log = bin.log;
  info.compile_ms = bin.compile_ms;
  info.cache_hit = bin.cache_hit;
  k->info = std::move(info);
  return std::unique_ptr<DeviceKernel>(std::move(k));
}

std::optional<std::string> CudaDevice::launch_limits(Dim3 grid, uint64_t shared) const {
  if (grid.y > 65535 || grid.z > 65535 || grid.x > 0x7fffffffu)
    return "grid " + grid.to_string() + " exceeds CUDA's limits (2^31-1, 65535, 65535)";
  if (shared > static_cast<uint64_t>(max_dynamic_shared_))
    return std::to_string(shared) + " bytes of dynamic shared memory per block exceed " + id_ +
           "'s limit of " + std::to_string(max_dynamic_shared_);
  return std::nullopt;
}

std::optional<std::string> CudaDevice::memory_problem(const ConstTensorView& t) const {
  if (t.memory_class() == MemoryClass::kDevice && t.device_id() == ordinal_) return std::nullopt;
  return "needs device memory on " + id_ + " (KernelExecutor::allocate)";
}

Status CudaDevice::launch(DeviceKernel& kernel, Dim3 grid, Dim3 block, uint64_t shared, void* stream,
                          void** params) {
  GANTRY_RETURN_IF_ERROR(usable());
  const cu::Function f = static_cast<Kernel&>(kernel).function();
  const std::string& entry = kernel.info.entry;
  const cu::Api& a = cu::driver().api;
  a.ctx_set_current(ctx_);
  if (shared > 48 * 1024)  // beyond 48 KiB a kernel must opt in
    GANTRY_RETURN_IF_ERROR(
        check(a.func_set_attribute(f, cu::kFuncMaxDynamicSharedBytes, static_cast<int>(shared)),
              "raising the dynamic shared memory limit of " + entry));
  const cu::Result r =
      a.launch_kernel(f, grid.x, grid.y, grid.z, block.x, block.y, block.z, static_cast<unsigned>(shared),
                      static_cast<cu::Stream>(stream), params, nullptr);
  if (r == cu::kSuccess) return Status::Ok();  // the hot path builds no message
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

Result<TensorView> CudaDevice::allocate(DType dtype, const Shape& shape, void*& owned) {
  owned = nullptr;
  if (dtype_size(dtype) == 0 || shape.is_dynamic())
    return InvalidArgument("cannot allocate a " + std::string(dtype_name(dtype)) + " tensor of shape " +
                           shape.to_string() + " on " + id_);
  const uint64_t bytes = static_cast<uint64_t>(shape.element_count().value_or(0)) * dtype_size(dtype);
  GANTRY_RETURN_IF_ERROR(usable());
  GANTRY_RETURN_IF_ERROR(pool_ready());
  GANTRY_ASSIGN_OR_RETURN(void* p, pool_->allocate(bytes));
  if (p) {
    const cu::Api& a = cu::driver().api;
    a.ctx_set_current(ctx_);
    if (Status st = check(a.memset_d8(dptr(p), 0, bytes), "zeroing a new tensor"); !st.ok()) {
      (void)pool_->free(p);
      return st;
    }
  }
  owned = p;
  return TensorView::over(dtype, shape, p, bytes, MemoryClass::kDevice, ordinal_);
}

Status CudaDevice::release(void* p) {
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
