#include "gantry/kernels/executor.h"

#include <dlfcn.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "gantry/hw/detect.h"
#include "gantry/memory/block_pool.h"
#include "kernels/cpu_kernel.h"
#include "kernels/cuda_kernel.h"

namespace gantry::kernels {

namespace {

using internal::CpuBinary;
using internal::CpuContext;
using internal::CpuEntry;
using internal::CudaDevice;

constexpr int kCpuMaxThreadsPerBlock = 1024;
constexpr uint64_t kCpuMaxLocalBytes = 64ull << 20;  // per block, one buffer per worker thread

// "cpu"/"cpu:0" -> -1, "cuda:N" -> N; InvalidArgument otherwise.
Result<int> parse_device(std::string_view device) {
  if (device == "cpu" || device == "cpu:0") return -1;
  if (device.rfind("cuda:", 0) == 0) {
    int n = -1;
    const auto digits = device.substr(5);
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (ec == std::errc() && p == digits.data() + digits.size() && n >= 0) return n;
  }
  return InvalidArgument("unknown kernel device '" + std::string(device) + "'; use cpu or cuda:N");
}

std::string device_name(int ordinal) { return ordinal < 0 ? "cpu" : "cuda:" + std::to_string(ordinal); }

struct Loaded {
  std::string device;
  int ordinal = -1;
  KernelInfo info;
  // CPU
  void* library = nullptr;
  CpuEntry entry = nullptr;
  // CUDA
  CudaDevice* cuda = nullptr;
  internal::cu::Module module = nullptr;
  internal::cu::Function function = nullptr;
};

}  // namespace

std::string Dim3::to_string() const {
  return std::to_string(x) + "," + std::to_string(y) + "," + std::to_string(z);
}

Result<Dim3> parse_dim3(std::string_view text) {
  Dim3 d;
  uint32_t* slots[] = {&d.x, &d.y, &d.z};
  size_t i = 0;
  std::string_view rest = text;
  while (true) {
    const auto comma = rest.find(',');
    const auto part = rest.substr(0, comma);
    if (i == 3) return InvalidArgument("'" + std::string(text) + "' has more than 3 dimensions");
    uint32_t v = 0;
    auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (ec != std::errc() || p != part.data() + part.size() || v == 0)
      return InvalidArgument("'" + std::string(text) + "' is not X[,Y[,Z]] of positive integers");
    *slots[i++] = v;
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return d;
}

KernelArg KernelArg::tensor(const Tensor& t) {
  KernelArg a;
  a.kind_ = Kind::kTensor;
  a.tensor_ = t;
  return a;
}

#define GANTRY_SCALAR_ARG(fn, ctype, stype) \
  KernelArg KernelArg::fn(ctype v) {        \
    KernelArg a;                            \
    a.kind_ = Kind::kScalar;                \
    a.scalar_ = ScalarType::stype;          \
    std::memcpy(&a.bits_, &v, sizeof v);    \
    return a;                               \
  }
GANTRY_SCALAR_ARG(boolean, bool, kBool)
GANTRY_SCALAR_ARG(i32, int32_t, kI32)
GANTRY_SCALAR_ARG(i64, int64_t, kI64)
GANTRY_SCALAR_ARG(u32, uint32_t, kU32)
GANTRY_SCALAR_ARG(u64, uint64_t, kU64)
GANTRY_SCALAR_ARG(f32, float, kF32)
GANTRY_SCALAR_ARG(f64, double, kF64)
#undef GANTRY_SCALAR_ARG

KernelArg KernelArg::local_memory(uint64_t bytes) {
  KernelArg a;
  a.kind_ = Kind::kLocalMemory;
  a.local_ = bytes;
  return a;
}

Result<KernelArg> KernelArg::parse_scalar(std::string_view text) {
  const auto colon = text.find(':');
  const auto type = parse_scalar_type(text.substr(0, colon));
  if (colon == std::string_view::npos || !type)
    return InvalidArgument("'" + std::string(text) +
                           "' is not TYPE:VALUE with TYPE bool/i32/i64/u32/u64/f32/f64");
  const std::string value(text.substr(colon + 1));
  const auto bad = [&] {
    return InvalidArgument("'" + value + "' is not a " + std::string(scalar_type_name(*type)));
  };
  const char* b = value.data();
  const char* e = b + value.size();
  switch (*type) {
    case ScalarType::kBool:
      if (value == "true" || value == "1") return boolean(true);
      if (value == "false" || value == "0") return boolean(false);
      return bad();
    case ScalarType::kF32:
    case ScalarType::kF64: {
      char* end = nullptr;
      const double v = std::strtod(value.c_str(), &end);
      if (value.empty() || end != value.c_str() + value.size()) return bad();
      return *type == ScalarType::kF32 ? f32(static_cast<float>(v)) : f64(v);
    }
    case ScalarType::kI32: {
      int32_t v = 0;
      auto [p, ec] = std::from_chars(b, e, v);
      if (ec != std::errc() || p != e) return bad();
      return i32(v);
    }
    case ScalarType::kI64: {
      int64_t v = 0;
      auto [p, ec] = std::from_chars(b, e, v);
      if (ec != std::errc() || p != e) return bad();
      return i64(v);
    }
    case ScalarType::kU32: {
      uint32_t v = 0;
      auto [p, ec] = std::from_chars(b, e, v);
      if (ec != std::errc() || p != e) return bad();
      return u32(v);
    }
    case ScalarType::kU64: {
      uint64_t v = 0;
      auto [p, ec] = std::from_chars(b, e, v);
      if (ec != std::errc() || p != e) return bad();
      return u64(v);
    }
  }
  return bad();
}

std::string KernelArg::describe() const {
  switch (kind_) {
    case Kind::kTensor: {
      std::string where = tensor_.memory_class() == MemoryClass::kDevice
                              ? "cuda:" + std::to_string(tensor_.device_id())
                              : std::string(memory_class_name(tensor_.memory_class()));
      return std::string(dtype_name(tensor_.dtype())) + " tensor " + tensor_.shape().to_string() + " on " +
             where;
    }
    case Kind::kLocalMemory:
      return "local memory " + std::to_string(local_) + " B";
    case Kind::kScalar:
      break;
  }
  std::string v;
  switch (scalar_) {
    case ScalarType::kBool:
      v = (bits_ & 0xff) ? "true" : "false";
      break;
    case ScalarType::kI32:
      v = std::to_string(static_cast<int32_t>(bits_));
      break;
    case ScalarType::kI64:
      v = std::to_string(static_cast<int64_t>(bits_));
      break;
    case ScalarType::kU32:
      v = std::to_string(static_cast<uint32_t>(bits_));
      break;
    case ScalarType::kU64:
      v = std::to_string(bits_);
      break;
    case ScalarType::kF32: {
      float f;
      std::memcpy(&f, &bits_, sizeof f);
      v = std::to_string(f);
      break;
    }
    case ScalarType::kF64: {
      double f;
      std::memcpy(&f, &bits_, sizeof f);
      v = std::to_string(f);
      break;
    }
  }
  return std::string(scalar_type_name(scalar_)) + " " + v;
}

struct KernelExecutor::Impl {
  ExecutorOptions options;
  std::filesystem::path cache_dir;
  std::mutex mu;  // handles, devices, allocations
  std::map<uint64_t, std::shared_ptr<Loaded>> loaded;
  uint64_t next_id = 1;
  std::map<int, std::unique_ptr<CudaDevice>> cuda;
  std::map<int, Status> cuda_failed;  // why a device could not be opened
  std::map<void*, int> allocations;   // CUDA tensor memory -> ordinal
  std::mutex cpu_mu;                  // one CPU launch at a time
  std::unique_ptr<internal::BlockRunner> runner;
  std::vector<std::vector<std::byte>> scratch;  // per CPU worker: its block's local memory

  Result<CudaDevice*> cuda_device(int ordinal) {
    std::lock_guard lock(mu);
    if (auto it = cuda.find(ordinal); it != cuda.end()) return it->second.get();
    if (auto it = cuda_failed.find(ordinal); it != cuda_failed.end()) return it->second;
    if (!options.registry && memory::internal::cu::driver().status.ok())
      options.registry = hw::detect_local();
    const hw::Device* entry = nullptr;
    if (options.registry)
      for (const auto& d : options.registry->devices)
        if (d.id == device_name(ordinal)) entry = &d;
    memory::BlockPool* pool = nullptr;
    for (auto* p : options.pools)
      if (p && p->device() == device_name(ordinal)) pool = p;
    auto dev = CudaDevice::open(ordinal, entry, pool);
    if (!dev.ok()) {
      cuda_failed.emplace(ordinal, dev.status());
      return dev.status();
    }
    CudaDevice* raw = dev->get();
    cuda.emplace(ordinal, std::move(*dev));
    return raw;
  }

  Result<std::shared_ptr<Loaded>> find(KernelHandle h) {
    std::lock_guard lock(mu);
    auto it = loaded.find(h.id);
    if (it == loaded.end())
      return NotFound("kernel handle " + std::to_string(h.id) +
                      " is not loaded (unloaded already, or never)");
    return it->second;
  }
};

KernelExecutor::KernelExecutor(ExecutorOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->cache_dir = options.cache_dir.empty() ? default_cache_dir() : options.cache_dir;
  impl_->options = std::move(options);
}

KernelExecutor::~KernelExecutor() {
  for (auto& [id, k] : impl_->loaded) {
    if (k->library) ::dlclose(k->library);
    if (k->module) k->cuda->unload_module(k->module);
  }
  for (auto& [p, ordinal] : impl_->allocations) (void)impl_->cuda[ordinal]->free(p);
}

const std::filesystem::path& KernelExecutor::cache_dir() const { return impl_->cache_dir; }

Status KernelExecutor::available(std::string_view device) {
  GANTRY_ASSIGN_OR_RETURN(int ordinal, parse_device(device));
  if (ordinal < 0) {
    if (internal::find_in_path("c++").empty() && internal::find_in_path("cc").empty())
      return Unavailable(
          "CPU kernels are unavailable: no C/C++ compiler (c++ or cc) on PATH; install gcc/g++ or clang");
    return Status::Ok();
  }
  if (auto v = nvrtc_version(); !v.ok()) return v.status();
  GANTRY_ASSIGN_OR_RETURN(CudaDevice * dev, impl_->cuda_device(ordinal));
  return dev->usable();
}

Result<KernelHandle> KernelExecutor::load(std::string_view source, std::string_view entry,
                                          std::string_view device, const KernelOptions& options) {
  GANTRY_ASSIGN_OR_RETURN(int ordinal, parse_device(device));
  const std::string source_name =
      !options.source_name.empty() ? options.source_name : (ordinal < 0 ? "kernel.cpp" : "kernel.cu");
  auto sig =
      options.signature ? parse_parameter_list(*options.signature, entry) : parse_signature(source, entry);
  if (!sig.ok()) return sig.status().with_context(source_name);
  auto k = std::make_shared<Loaded>();
  k->ordinal = ordinal;
  k->device = device_name(ordinal);
  KernelInfo& info = k->info;
  info.entry = std::string(entry);
  info.device = k->device;
  info.signature = *sig;
  if (ordinal < 0) {
    if (options.signature) {
      // The compiled trampoline passes ctx first: the convention holds even when the list is given.
      info.signature.cpu_context = true;
    } else if (!sig->cpu_context) {
      return InvalidArgument(
          source_name + ": CPU kernel " + std::string(entry) +
          " must take `const gantry_kernel_ctx* ctx` as its first parameter (docs/kernels.md)");
    }
    auto bin = internal::compile_cpu(source, info.signature, source_name, options.flags, impl_->cache_dir,
                                     options.use_cache);
    if (!bin.ok()) return bin.status();
    void* lib = ::dlopen(bin->so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!options.use_cache) {
      std::error_code ec;
      std::filesystem::remove(bin->so_path, ec);  // the mapping stays valid
    }
    if (!lib) {
      const char* e = ::dlerror();
      return Internal("loading the compiled kernel " + bin->so_path.string() + " failed: " + (e ? e : "?"));
    }
    const std::string symbol = "gantry_launch_" + std::string(entry);
    k->entry = reinterpret_cast<CpuEntry>(::dlsym(lib, symbol.c_str()));
    if (!k->entry) {
      ::dlclose(lib);
      return Internal("the compiled kernel lacks " + symbol);
    }
    k->library = lib;
    info.target = bin->compiler;
    info.max_threads_per_block = kCpuMaxThreadsPerBlock;
    info.binary_bytes = bin->size;
    info.compile_log = bin->log;
    info.compile_ms = bin->compile_ms;
    info.cache_hit = bin->cache_hit;
    if (options.use_cache) info.cache_file = bin->so_path;
  } else {
    GANTRY_ASSIGN_OR_RETURN(CudaDevice * dev, impl_->cuda_device(ordinal));
    GANTRY_RETURN_IF_ERROR(dev->usable());
    CudaCompileOptions copts;
    copts.arch = options.arch.empty() ? dev->arch() : options.arch;
    copts.flags = options.flags;
    copts.source_name = source_name;
    copts.cache_dir = impl_->cache_dir;
    copts.use_cache = options.use_cache;
    GANTRY_ASSIGN_OR_RETURN(auto bin, compile_cuda(source, entry, copts));
    internal::CudaFunctionInfo fi;
    GANTRY_ASSIGN_OR_RETURN(k->module, dev->load_module(bin.binary, bin.lowered_name, k->function, fi));
    k->cuda = dev;
    info.target = bin.arch + " (" + bin.compiler + ")";
    info.registers = fi.registers;
    info.static_shared_bytes = fi.static_shared;
    info.local_bytes = fi.local;
    info.max_threads_per_block = fi.max_threads;
    info.binary_bytes = bin.binary.size();
    info.compile_log = bin.log;
    info.compile_ms = bin.compile_ms;
    info.cache_hit = bin.cache_hit;
  }
  std::lock_guard lock(impl_->mu);
  const uint64_t id = impl_->next_id++;
  impl_->loaded.emplace(id, std::move(k));
  return KernelHandle{id};
}

Status KernelExecutor::launch(KernelHandle handle, std::span<const KernelArg> args, Dim3 grid, Dim3 block,
                              uint64_t shared_bytes, void* stream) {
  GANTRY_ASSIGN_OR_RETURN(auto k, impl_->find(handle));
  const KernelSignature& sig = k->info.signature;
  // Messages are built only on the error path: a launch is on the hot path (kernel-launch-vs-driver).
  const auto who = [&] { return "kernel " + sig.entry + " on " + k->device; };
  if (grid.count() == 0 || block.count() == 0)
    return InvalidArgument(who() + ": grid " + grid.to_string() + " and block " + block.to_string() +
                           " must have every dimension >= 1");
  if (block.count() > static_cast<uint64_t>(k->info.max_threads_per_block))
    return InvalidArgument(who() + ": a block of " + block.to_string() + " = " +
                           std::to_string(block.count()) + " threads exceeds this kernel's limit of " +
                           std::to_string(k->info.max_threads_per_block));
  if (k->ordinal >= 0 && (grid.y > 65535 || grid.z > 65535 || grid.x > 0x7fffffffu))
    return InvalidArgument(who() + ": grid " + grid.to_string() +
                           " exceeds CUDA's limits (2^31-1, 65535, 65535)");

  // The signature check: nothing runs unless every argument matches its parameter.
  // Per-thread buffers, reused: no allocation per launch once warm. They are free again when launch()
  // returns (cuLaunchKernel copies the parameters; CPU launches are synchronous).
  thread_local std::vector<const KernelArg*> params;
  thread_local std::vector<uint64_t> values;
  thread_local std::vector<void*> slots;  // slots[i] points at values[i], as cuLaunchKernel wants
  params.clear();
  uint64_t local = 0;
  for (const auto& a : args) {
    if (a.kind() == KernelArg::Kind::kLocalMemory)
      local += a.local_bytes();
    else
      params.push_back(&a);
  }
  if (params.size() != sig.params.size())
    return InvalidArgument(who() + " takes " + std::to_string(sig.params.size()) + " argument(s), " +
                           sig.to_string() + "; got " + std::to_string(params.size()));
  values.assign(params.size(), 0);
  slots.assign(params.size(), nullptr);
  for (size_t i = 0; i < params.size(); ++i) {
    const KernelParam& p = sig.params[i];
    const KernelArg& a = *params[i];
    const auto where = [&] {
      return who() + ", argument " + std::to_string(i + 1) + (p.name.empty() ? "" : " (" + p.name + ")");
    };
    if (p.is_pointer) {
      if (a.kind() != KernelArg::Kind::kTensor)
        return InvalidArgument(where() + ": expects a tensor (" + p.type_text + "), got " + a.describe());
      const Tensor& t = a.tensor_value();
      if (p.element && t.dtype() != *p.element)
        return InvalidArgument(where() + ": expects a " + std::string(dtype_name(*p.element)) + " tensor (" +
                               p.type_text + "), got " + a.describe());
      const bool on_device = t.memory_class() == MemoryClass::kDevice;
      if (k->ordinal < 0 && on_device)
        return InvalidArgument(where() + ": a CPU kernel needs host memory, got " + a.describe());
      if (k->ordinal >= 0 && (!on_device || t.device_id() != k->ordinal))
        return InvalidArgument(where() + ": needs device memory on " + k->device +
                               " (KernelExecutor::allocate), got " + a.describe());
      if (t.data() == nullptr && t.element_count() > 0)
        return InvalidArgument(where() + ": the tensor has no data");
      values[i] = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(t.data()));
    } else {
      if (a.kind() != KernelArg::Kind::kScalar || a.scalar_type() != p.scalar)
        return InvalidArgument(where() + ": expects a " + std::string(scalar_type_name(p.scalar)) +
                               " scalar (" + p.type_text + "), got " + a.describe());
      std::memcpy(&values[i], a.scalar_bytes(), scalar_size(p.scalar));
    }
    slots[i] = &values[i];
  }
  const uint64_t shared = shared_bytes + local;
  const uint32_t g[3] = {grid.x, grid.y, grid.z};
  const uint32_t b[3] = {block.x, block.y, block.z};
  if (k->ordinal >= 0) return k->cuda->launch(k->function, g, b, shared, stream, slots.data(), sig.entry);

  if (shared > kCpuMaxLocalBytes)
    return InvalidArgument(who() + ": " + std::to_string(shared) +
                           " bytes of local memory per block exceed the CPU " + "device's limit of " +
                           std::to_string(kCpuMaxLocalBytes) + " (64 MiB)");
  std::lock_guard lock(impl_->cpu_mu);
  if (!impl_->runner) {
    unsigned n =
        impl_->options.cpu_threads ? impl_->options.cpu_threads : std::thread::hardware_concurrency();
    impl_->runner = std::make_unique<internal::BlockRunner>(std::max(1u, n));
    impl_->scratch.resize(impl_->runner->threads());
  }
  const uint64_t padded = (shared + 63) / 64 * 64 + 64;
  for (auto& s : impl_->scratch)
    if (s.size() < padded) s.resize(padded);
  CpuEntry fn = k->entry;
  void** argv = slots.data();
  auto& scratch = impl_->scratch;
  impl_->runner->run(grid.count(), [&](unsigned worker, uint64_t linear) {
    CpuContext ctx{};
    std::memcpy(ctx.grid_dim, g, sizeof g);
    std::memcpy(ctx.block_dim, b, sizeof b);
    ctx.block_idx[0] = static_cast<uint32_t>(linear % grid.x);
    ctx.block_idx[1] = static_cast<uint32_t>((linear / grid.x) % grid.y);
    ctx.block_idx[2] = static_cast<uint32_t>(linear / (uint64_t{grid.x} * grid.y));
    if (shared > 0) {
      auto addr = reinterpret_cast<uintptr_t>(scratch[worker].data());
      ctx.shared = reinterpret_cast<void*>((addr + 63) / 64 * 64);
      ctx.shared_bytes = shared;
    }
    fn(&ctx, argv);
  });
  return Status::Ok();
}

Result<KernelInfo> KernelExecutor::info(KernelHandle handle) const {
  GANTRY_ASSIGN_OR_RETURN(auto k, impl_->find(handle));
  return k->info;
}

Status KernelExecutor::unload(KernelHandle handle) {
  std::shared_ptr<Loaded> k;
  {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->loaded.find(handle.id);
    if (it == impl_->loaded.end())
      return NotFound("kernel handle " + std::to_string(handle.id) +
                      " is not loaded (unloaded already, or never)");
    k = std::move(it->second);
    impl_->loaded.erase(it);
  }
  if (k->library) {
    std::lock_guard lock(impl_->cpu_mu);  // not while a launch runs its code
    ::dlclose(k->library);
  }
  if (k->module) k->cuda->unload_module(k->module);
  return Status::Ok();
}

Status KernelExecutor::synchronize(std::string_view device) {
  GANTRY_ASSIGN_OR_RETURN(int ordinal, parse_device(device));
  if (ordinal < 0) return Status::Ok();  // CPU launches are synchronous
  GANTRY_ASSIGN_OR_RETURN(CudaDevice * dev, impl_->cuda_device(ordinal));
  return dev->synchronize();
}

Result<Tensor> KernelExecutor::allocate(std::string_view device, DType dtype, const Shape& shape) {
  GANTRY_ASSIGN_OR_RETURN(int ordinal, parse_device(device));
  if (ordinal < 0) return Tensor::allocate(dtype, shape);
  if (dtype_size(dtype) == 0 || shape.is_dynamic())
    return InvalidArgument("cannot allocate a " + std::string(dtype_name(dtype)) + " tensor of shape " +
                           shape.to_string() + " on " + std::string(device));
  const uint64_t bytes = static_cast<uint64_t>(shape.element_count().value_or(0)) * dtype_size(dtype);
  GANTRY_ASSIGN_OR_RETURN(CudaDevice * dev, impl_->cuda_device(ordinal));
  GANTRY_ASSIGN_OR_RETURN(void* p, dev->allocate(bytes));
  if (p) {
    std::lock_guard lock(impl_->mu);
    impl_->allocations.emplace(p, ordinal);
  }
  return Tensor::view(dtype, shape, p, bytes, MemoryClass::kDevice, ordinal);
}

Status KernelExecutor::release(const Tensor& t) {
  if (t.memory_class() != MemoryClass::kDevice) return Status::Ok();
  void* p = const_cast<void*>(t.data());
  int ordinal = -1;
  {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->allocations.find(p);
    if (it == impl_->allocations.end())
      return InvalidArgument(
          "the tensor was not allocated by this kernel executor (or was released already)");
    ordinal = it->second;
    impl_->allocations.erase(it);
  }
  GANTRY_ASSIGN_OR_RETURN(CudaDevice * dev, impl_->cuda_device(ordinal));
  return dev->free(p);
}

Status KernelExecutor::copy_to_device(const Tensor& host, Tensor& device_tensor) {
  if (host.dtype() != device_tensor.dtype() || host.element_count() != device_tensor.element_count())
    return InvalidArgument("copy to device: a " + std::string(dtype_name(host.dtype())) + " tensor " +
                           host.shape().to_string() + " does not fit a " +
                           std::string(dtype_name(device_tensor.dtype())) + " tensor " +
                           device_tensor.shape().to_string());
  if (host.memory_class() == MemoryClass::kDevice)
    return InvalidArgument("copy to device: the source is not host memory");
  if (device_tensor.memory_class() != MemoryClass::kDevice) {
    if (host.byte_size()) std::memcpy(device_tensor.data(), host.data(), host.byte_size());
    return Status::Ok();
  }
  GANTRY_ASSIGN_OR_RETURN(CudaDevice * dev, impl_->cuda_device(device_tensor.device_id()));
  if (host.byte_size() == 0) return Status::Ok();
  return dev->copy_to_device(device_tensor.data(), host.data(), host.byte_size());
}

Result<Tensor> KernelExecutor::copy_to_host(const Tensor& device_tensor) {
  if (device_tensor.memory_class() != MemoryClass::kDevice) return device_tensor.clone();
  GANTRY_ASSIGN_OR_RETURN(Tensor host, Tensor::allocate(device_tensor.dtype(), device_tensor.shape()));
  GANTRY_ASSIGN_OR_RETURN(CudaDevice * dev, impl_->cuda_device(device_tensor.device_id()));
  if (host.byte_size() == 0) return host;
  GANTRY_RETURN_IF_ERROR(dev->copy_to_host(host.data(), device_tensor.data(), host.byte_size()));
  return host;
}

}  // namespace gantry::kernels
