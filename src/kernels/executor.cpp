#include "gantry/kernels/executor.h"

#include <dlfcn.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>

#include "gantry/hw/detect.h"
#include "gantry/memory/block_pool.h"
#include "kernels/cpu_kernel.h"
#include "kernels/cuda_kernel.h"

namespace gantry::kernels {

namespace {

using internal::DeviceKernel;
using internal::KernelDevice;

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

// The whole of [b, e) as a T; nullopt when it is not a number or out of T's range.
template <typename T>
std::optional<T> parse_integer(const char* b, const char* e) {
  T v = 0;
  auto [p, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || p != e) return std::nullopt;
  return v;
}

std::string device_name(int ordinal) { return ordinal < 0 ? "cpu" : "cuda:" + std::to_string(ordinal); }

struct Loaded {
  KernelDevice* device = nullptr;
  std::unique_ptr<DeviceKernel> kernel;
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

KernelArg KernelArg::tensor(ConstTensorView t) {
  KernelArg a;
  a.kind_ = Kind::kTensor;
  a.tensor_ = std::move(t);
  return a;
}

KernelArg KernelArg::buffer(const void* data, uint64_t bytes, MemoryClass memory, int device_id) {
  KernelArg a;
  a.kind_ = Kind::kBuffer;
  a.buffer_bytes_ = bytes;
  // A null pointer (or a size past int64) makes no view: the buffer keeps an empty one, which launch()
  // refuses as "no data" when bytes > 0.
  Result<ConstTensorView> view = InvalidArgument("larger than int64");
  if (bytes <= static_cast<uint64_t>(INT64_MAX))
    view = ConstTensorView::over(DType::kUInt8, Shape({static_cast<int64_t>(bytes)}), data, bytes, memory,
                                 device_id);
  if (!view.ok()) view = ConstTensorView::over(DType::kUInt8, Shape({0}), nullptr, 0, memory, device_id);
  if (view.ok()) a.tensor_ = *view;
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
GANTRY_SCALAR_ARG(i8, int8_t, kI8)
GANTRY_SCALAR_ARG(u8, uint8_t, kU8)
GANTRY_SCALAR_ARG(i16, int16_t, kI16)
GANTRY_SCALAR_ARG(u16, uint16_t, kU16)
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
                           "' is not TYPE:VALUE with TYPE bool/i8/u8/i16/u16/i32/i64/u32/u64/f32/f64");
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
    case ScalarType::kI8:
      if (auto v = parse_integer<int8_t>(b, e)) return i8(*v);
      return bad();
    case ScalarType::kU8:
      if (auto v = parse_integer<uint8_t>(b, e)) return u8(*v);
      return bad();
    case ScalarType::kI16:
      if (auto v = parse_integer<int16_t>(b, e)) return i16(*v);
      return bad();
    case ScalarType::kU16:
      if (auto v = parse_integer<uint16_t>(b, e)) return u16(*v);
      return bad();
    case ScalarType::kI32:
      if (auto v = parse_integer<int32_t>(b, e)) return i32(*v);
      return bad();
    case ScalarType::kI64:
      if (auto v = parse_integer<int64_t>(b, e)) return i64(*v);
      return bad();
    case ScalarType::kU32:
      if (auto v = parse_integer<uint32_t>(b, e)) return u32(*v);
      return bad();
    case ScalarType::kU64:
      if (auto v = parse_integer<uint64_t>(b, e)) return u64(*v);
      return bad();
  }
  return bad();
}

std::string KernelArg::describe() const {
  switch (kind_) {
    case Kind::kTensor:
    case Kind::kBuffer: {
      std::string where = tensor_.memory_class() == MemoryClass::kDevice
                              ? "cuda:" + std::to_string(tensor_.device_id())
                              : std::string(memory_class_name(tensor_.memory_class()));
      if (kind_ == Kind::kBuffer)
        return "buffer of " + std::to_string(buffer_bytes_) + " B " +
               (tensor_.data() ? "on " + where : "at null");
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
    case ScalarType::kI8:
      v = std::to_string(static_cast<int8_t>(bits_));
      break;
    case ScalarType::kU8:
      v = std::to_string(static_cast<uint8_t>(bits_));
      break;
    case ScalarType::kI16:
      v = std::to_string(static_cast<int16_t>(bits_));
      break;
    case ScalarType::kU16:
      v = std::to_string(static_cast<uint16_t>(bits_));
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
  std::map<int, std::unique_ptr<KernelDevice>> devices;  // by ordinal, the CPU at -1
  std::map<int, Status> failed;                          // why a device could not be opened
  std::map<void*, KernelDevice*> allocations;            // allocate()'s memory -> its device

  Result<KernelDevice*> device(int ordinal) {
    std::lock_guard lock(mu);
    if (auto it = devices.find(ordinal); it != devices.end()) return it->second.get();
    if (auto it = failed.find(ordinal); it != failed.end()) return it->second;
    Result<std::unique_ptr<KernelDevice>> dev = open(ordinal);
    if (!dev.ok()) {
      failed.emplace(ordinal, dev.status());
      return dev.status();
    }
    KernelDevice* raw = dev->get();
    devices.emplace(ordinal, std::move(*dev));
    return raw;
  }

  Result<KernelDevice*> device(std::string_view name) {
    GANTRY_ASSIGN_OR_RETURN(int ordinal, parse_device(name));
    return device(ordinal);
  }

  Result<std::unique_ptr<KernelDevice>> open(int ordinal) {
    if (ordinal < 0)
      return std::unique_ptr<KernelDevice>(std::make_unique<internal::CpuDevice>(options.cpu_threads));
    if (!options.registry && memory::internal::cu::driver().status.ok())
      options.registry = hw::detect_local();
    const hw::Device* entry = nullptr;
    if (options.registry)
      for (const auto& d : options.registry->devices)
        if (d.id == device_name(ordinal)) entry = &d;
    memory::BlockPool* pool = nullptr;
    for (auto* p : options.pools)
      if (p && p->device() == device_name(ordinal)) pool = p;
    GANTRY_ASSIGN_OR_RETURN(auto dev, internal::CudaDevice::open(ordinal, entry, pool));
    return std::unique_ptr<KernelDevice>(std::move(dev));
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
  impl_->loaded.clear();  // kernels unload before their devices go
  for (auto& [p, dev] : impl_->allocations) (void)dev->release(p);
}

const std::filesystem::path& KernelExecutor::cache_dir() const { return impl_->cache_dir; }

Status KernelExecutor::available(std::string_view device) {
  GANTRY_ASSIGN_OR_RETURN(int ordinal, parse_device(device));
  if (ordinal >= 0) {
    if (auto v = nvrtc_version(); !v.ok()) return v.status();
  }
  GANTRY_ASSIGN_OR_RETURN(KernelDevice * dev, impl_->device(ordinal));
  return dev->usable();
}

Result<KernelHandle> KernelExecutor::load(std::string_view source, std::string_view entry,
                                          std::string_view device, const KernelOptions& options) {
  GANTRY_ASSIGN_OR_RETURN(int ordinal, parse_device(device));
  // Opening a CUDA device needs the driver; a CPU device always opens (no compiler is a compile error).
  Result<KernelDevice*> dev = impl_->device(ordinal);
  const std::string source_name = !options.source_name.empty() ? options.source_name
                                  : dev.ok()                   ? (*dev)->default_source_name()
                                                               : std::string("kernel.cu");
  auto sig =
      options.signature ? parse_parameter_list(*options.signature, entry) : parse_signature(source, entry);
  if (!sig.ok()) return sig.status().with_context(source_name);
  if (!dev.ok()) return dev.status();
  KernelInfo info;
  info.entry = std::string(entry);
  info.device = (*dev)->name();
  info.signature = *sig;
  auto loaded = std::make_shared<Loaded>();
  loaded->device = *dev;
  GANTRY_ASSIGN_OR_RETURN(loaded->kernel,
                          (*dev)->load(source, std::move(info), source_name, options, impl_->cache_dir));
  std::lock_guard lock(impl_->mu);
  const uint64_t id = impl_->next_id++;
  impl_->loaded.emplace(id, std::move(loaded));
  return KernelHandle{id};
}

Status KernelExecutor::launch(KernelHandle handle, std::span<const KernelArg> args, Dim3 grid, Dim3 block,
                              uint64_t shared_bytes, void* stream) {
  GANTRY_ASSIGN_OR_RETURN(auto k, impl_->find(handle));
  KernelDevice& dev = *k->device;
  const KernelInfo& info = k->kernel->info;
  const KernelSignature& sig = info.signature;
  // Messages are built only on the error path: a launch is on the hot path (kernel-launch-vs-driver).
  const auto who = [&] { return "kernel " + sig.entry + " on " + info.device; };
  if (grid.count() == 0 || block.count() == 0)
    return InvalidArgument(who() + ": grid " + grid.to_string() + " and block " + block.to_string() +
                           " must have every dimension >= 1");
  if (block.count() > static_cast<uint64_t>(info.max_threads_per_block))
    return InvalidArgument(who() + ": a block of " + block.to_string() + " = " +
                           std::to_string(block.count()) + " threads exceeds this kernel's limit of " +
                           std::to_string(info.max_threads_per_block));

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
  const uint64_t shared = shared_bytes + local;
  if (auto why = dev.launch_limits(grid, shared)) return InvalidArgument(who() + ": " + *why);
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
      const bool buffer = a.kind() == KernelArg::Kind::kBuffer;
      if (a.kind() != KernelArg::Kind::kTensor && !buffer)
        return InvalidArgument(where() + ": expects a tensor or buffer (" + p.type_text + "), got " +
                               a.describe());
      const ConstTensorView& t = a.tensor_value();
      if (p.element && !buffer && t.dtype() != *p.element)
        return InvalidArgument(where() + ": expects a " + std::string(dtype_name(*p.element)) + " tensor (" +
                               p.type_text + "), got " + a.describe());
      if (p.element && buffer && a.buffer_bytes() % dtype_size(*p.element) != 0)
        return InvalidArgument(where() + ": expects whole " + std::string(dtype_name(*p.element)) +
                               " elements (" + std::to_string(dtype_size(*p.element)) + " B each, " +
                               p.type_text + "), got a " + a.describe());
      if (auto why = dev.memory_problem(t))
        return InvalidArgument(where() + ": " + *why + ", got " + a.describe());
      if (t.data() == nullptr && (buffer ? a.buffer_bytes() > 0 : t.element_count() > 0))
        return InvalidArgument(where() + ": the " + (buffer ? "buffer" : "tensor") + " has no data");
      values[i] = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(t.data()));
    } else {
      if (a.kind() != KernelArg::Kind::kScalar || a.scalar_type() != p.scalar)
        return InvalidArgument(where() + ": expects a " + std::string(scalar_type_name(p.scalar)) +
                               " scalar (" + p.type_text + "), got " + a.describe());
      std::memcpy(&values[i], a.scalar_bytes(), scalar_size(p.scalar));
    }
    slots[i] = &values[i];
  }
  return dev.launch(*k->kernel, grid, block, shared, stream, slots.data());
}

Result<KernelInfo> KernelExecutor::info(KernelHandle handle) const {
  GANTRY_ASSIGN_OR_RETURN(auto k, impl_->find(handle));
  return k->kernel->info;
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
  k.reset();  // the device unloads it (a CPU kernel waits for a running launch)
  return Status::Ok();
}

Status KernelExecutor::synchronize(std::string_view device) {
  GANTRY_ASSIGN_OR_RETURN(KernelDevice * dev, impl_->device(device));
  return dev->synchronize();
}

Result<TensorView> KernelExecutor::allocate(std::string_view device, DType dtype, const Shape& shape) {
  GANTRY_ASSIGN_OR_RETURN(KernelDevice * dev, impl_->device(device));
  void* owned = nullptr;
  GANTRY_ASSIGN_OR_RETURN(TensorView t, dev->allocate(dtype, shape, owned));
  if (owned) {
    std::lock_guard lock(impl_->mu);
    impl_->allocations.emplace(owned, dev);
  }
  return t;
}

Status KernelExecutor::release(ConstTensorView t) {
  void* p = const_cast<void*>(t.data());
  KernelDevice* dev = nullptr;
  {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->allocations.find(p);
    if (it == impl_->allocations.end() && t.memory_class() != MemoryClass::kDevice) return Status::Ok();
    if (it == impl_->allocations.end())
      return InvalidArgument(
          "the tensor was not allocated by this kernel executor (or was released already)");
    dev = it->second;
    impl_->allocations.erase(it);
  }
  return dev->release(p);
}

Status KernelExecutor::copy_to_device(ConstTensorView host, TensorView device_tensor) {
  if (host.dtype() != device_tensor.dtype() || host.element_count() != device_tensor.element_count())
    return InvalidArgument("copy to device: a " + std::string(dtype_name(host.dtype())) + " tensor " +
                           host.shape().to_string() + " does not fit a " +
                           std::string(dtype_name(device_tensor.dtype())) + " tensor " +
                           device_tensor.shape().to_string());
  if (host.memory_class() == MemoryClass::kDevice)
    return InvalidArgument("copy to device: the source is not host memory");
  const bool on_device = device_tensor.memory_class() == MemoryClass::kDevice;
  GANTRY_ASSIGN_OR_RETURN(KernelDevice * dev, impl_->device(on_device ? device_tensor.device_id() : -1));
  if (host.byte_size() == 0) return Status::Ok();
  return dev->copy_to_device(device_tensor.data(), host.data(), host.byte_size());
}

Result<Tensor> KernelExecutor::copy_to_host(ConstTensorView device_tensor) {
  GANTRY_ASSIGN_OR_RETURN(Tensor host, Tensor::allocate(device_tensor.dtype(), device_tensor.shape()));
  const bool on_device = device_tensor.memory_class() == MemoryClass::kDevice;
  GANTRY_ASSIGN_OR_RETURN(KernelDevice * dev, impl_->device(on_device ? device_tensor.device_id() : -1));
  if (host.byte_size() == 0) return host;
  GANTRY_RETURN_IF_ERROR(dev->copy_to_host(host.data(), device_tensor.data(), host.byte_size()));
  return host;
}

}  // namespace gantry::kernels
