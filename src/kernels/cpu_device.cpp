// CpuDevice (kernels/cpu_kernel.h): the CPU behind KernelExecutor.
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "kernels/cpu_kernel.h"

namespace gantry::kernels::internal {

namespace {

constexpr int kCpuMaxThreadsPerBlock = 1024;
constexpr int kCpuPreferredBlockSize = 256;          // see KernelInfo::preferred_block_size
constexpr uint64_t kCpuMaxLocalBytes = 64ull << 20;  // per block, one buffer per worker thread

}  // namespace

class CpuDevice::Kernel final : public DeviceKernel {
 public:
  Kernel(std::mutex& device_mu, void* library, CpuEntry entry)
      : mu_(device_mu), library_(library), entry_(entry) {}
  ~Kernel() override {
    std::lock_guard lock(mu_);  // not while a launch runs its code
    ::dlclose(library_);
  }
  CpuEntry entry() const { return entry_; }

 private:
  std::mutex& mu_;
  void* library_;
  CpuEntry entry_;
};

CpuDevice::CpuDevice(unsigned threads) : threads_(threads) {}
CpuDevice::~CpuDevice() = default;

Status CpuDevice::usable() const {
  if (find_in_path("c++").empty() && find_in_path("cc").empty())
    return Unavailable(
        "CPU kernels are unavailable: no C/C++ compiler (c++ or cc) on PATH; install gcc/g++ or clang");
  return Status::Ok();
}

Result<std::unique_ptr<DeviceKernel>> CpuDevice::load(std::string_view source, KernelInfo info,
                                                      const std::string& source_name,
                                                      const KernelOptions& options,
                                                      const std::filesystem::path& cache_dir) {
  if (options.signature) {
    // The compiled trampoline passes ctx first: the convention holds even when the list is given.
    info.signature.cpu_context = true;
  } else if (!info.signature.cpu_context) {
    return InvalidArgument(
        source_name + ": CPU kernel " + info.entry +
        " must take `const gantry_kernel_ctx* ctx` as its first parameter (docs/kernels.md)");
  }
  GANTRY_ASSIGN_OR_RETURN(CpuBinary bin, compile_cpu(source, info.signature, source_name, options.flags,
                                                     cache_dir, options.use_cache));
  void* lib = ::dlopen(bin.so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!options.use_cache) {
    std::error_code ec;
    std::filesystem::remove(bin.so_path, ec);  // the mapping stays valid
  }
  if (!lib) {
    const char* e = ::dlerror();
    return Internal("loading the compiled kernel " + bin.so_path.string() + " failed: " + (e ? e : "?"));
  }
  const std::string symbol = "gantry_launch_" + info.entry;
  auto entry = reinterpret_cast<CpuEntry>(::dlsym(lib, symbol.c_str()));
  if (!entry) {
    ::dlclose(lib);
    return Internal("the compiled kernel lacks " + symbol);
  }
  auto k = std::make_unique<Kernel>(mu_, lib, entry);
  info.target = bin.compiler;
  info.max_threads_per_block = kCpuMaxThreadsPerBlock;
  info.preferred_block_size = kCpuPreferredBlockSize;
  info.binary_bytes = bin.size;
  info.compile_log = bin.log;
  info.compile_ms = bin.compile_ms;
  info.cache_hit = bin.cache_hit;
  if (options.use_cache) info.cache_file = bin.so_path;
  k->info = std::move(info);
  return std::unique_ptr<DeviceKernel>(std::move(k));
}

std::optional<std::string> CpuDevice::launch_limits(Dim3 /*grid*/, uint64_t shared_bytes) const {
  if (shared_bytes <= kCpuMaxLocalBytes) return std::nullopt;
  return std::to_string(shared_bytes) + " bytes of local memory per block exceed the CPU device's limit of " +
         std::to_string(kCpuMaxLocalBytes) + " (64 MiB)";
}

std::optional<std::string> CpuDevice::memory_problem(const ConstTensorView& t) const {
  if (t.memory_class() != MemoryClass::kDevice) return std::nullopt;
  return std::string("a CPU kernel needs host memory");
}

Status CpuDevice::launch(DeviceKernel& kernel, Dim3 grid, Dim3 block, uint64_t shared, void* /*stream*/,
                         void** args) {
  const CpuEntry fn = static_cast<Kernel&>(kernel).entry();
  std::lock_guard lock(mu_);
  if (!runner_) {
    const unsigned n = threads_ ? threads_ : std::thread::hardware_concurrency();
    runner_ = std::make_unique<BlockRunner>(std::max(1u, n));
    scratch_.resize(runner_->threads());
  }
  const uint64_t padded = (shared + 63) / 64 * 64 + 64;
  for (auto& s : scratch_)
    if (s.size() < padded) s.resize(padded);
  const uint32_t g[3] = {grid.x, grid.y, grid.z};
  const uint32_t b[3] = {block.x, block.y, block.z};
  runner_->run(grid.count(), [&](unsigned worker, uint64_t linear) {
    CpuContext ctx{};
    std::memcpy(ctx.grid_dim, g, sizeof g);
    std::memcpy(ctx.block_dim, b, sizeof b);
    ctx.block_idx[0] = static_cast<uint32_t>(linear % grid.x);
    ctx.block_idx[1] = static_cast<uint32_t>((linear / grid.x) % grid.y);
    ctx.block_idx[2] = static_cast<uint32_t>(linear / (uint64_t{grid.x} * grid.y));
    if (shared > 0) {
      auto addr = reinterpret_cast<uintptr_t>(scratch_[worker].data());
      ctx.shared = reinterpret_cast<void*>((addr + 63) / 64 * 64);
      ctx.shared_bytes = shared;
    }
    fn(&ctx, args);
  });
  return Status::Ok();
}

Result<TensorView> CpuDevice::allocate(DType dtype, const Shape& shape, void*& owned) {
  owned = nullptr;
  GANTRY_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(dtype, shape));
  TensorView view = t;
  if (t.data() != nullptr) {
    std::lock_guard lock(allocations_mu_);
    owned = t.data();
    allocations_.emplace(owned, std::move(t));
  }
  return view;
}

Status CpuDevice::release(void* p) {
  std::lock_guard lock(allocations_mu_);
  if (allocations_.erase(p) == 0) return InvalidArgument("no tensor at that address was allocated on cpu");
  return Status::Ok();
}

Status CpuDevice::copy_to_device(void* dst, const void* src, uint64_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
  return Status::Ok();
}

Status CpuDevice::copy_to_host(void* dst, const void* src, uint64_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
  return Status::Ok();
}

}  // namespace gantry::kernels::internal
