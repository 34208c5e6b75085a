// One place kernels run, behind KernelExecutor: the CPU (cpu_kernel.h) or one CUDA GPU (cuda_kernel.h), as
// ggml has one backend device per device. The executor parses device names, keeps the handles and checks
// every launch's arguments against the kernel's signature; all that differs between devices is here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gantry/core/status.h"
#include "gantry/core/tensor.h"
#include "gantry/kernels/executor.h"

namespace gantry::kernels::internal {

// A kernel one device loaded. Destroying it unloads it (never while one of its launches runs).
class DeviceKernel {
 public:
  virtual ~DeviceKernel() = default;
  KernelInfo info;
};

class KernelDevice {
 public:
  virtual ~KernelDevice() = default;

  virtual const std::string& name() const = 0;  // "cpu", "cuda:0"
  // OK when kernels can run here; else why not (no compiler, a CUDA context lost to a faulting kernel).
  virtual Status usable() const = 0;
  // The file name compile messages use when the caller names none ("kernel.cpp", "kernel.cu").
  virtual std::string default_source_name() const = 0;

  // Compiles `source` (or takes it from the cache under `cache_dir`) and loads the entry `info.entry`,
  // whose parameters are `info.signature`. The returned kernel's info is `info` completed with the
  // device's facts (target, registers, sizes, compile log and time, cache).
  virtual Result<std::unique_ptr<DeviceKernel>> load(std::string_view source, KernelInfo info,
                                                     const std::string& source_name,
                                                     const KernelOptions& options,
                                                     const std::filesystem::path& cache_dir) = 0;

  // Why `grid` or `shared_bytes` of local memory per block cannot launch here; nullopt when they can.
  virtual std::optional<std::string> launch_limits(Dim3 grid, uint64_t shared_bytes) const = 0;
  // Why `t` cannot be a tensor argument of kernels here (memory the device cannot reach); nullopt if it can.
  virtual std::optional<std::string> memory_problem(const ConstTensorView& t) const = 0;
  // Runs `kernel` (loaded by this device) with args[i] pointing at the i-th parameter's value. CPU
  // launches return when done; CUDA launches are asynchronous on `stream`.
  virtual Status launch(DeviceKernel& kernel, Dim3 grid, Dim3 block, uint64_t shared_bytes, void* stream,
                        void** args) = 0;
  // Waits for every launch; reports a fault of an earlier asynchronous one.
  virtual Status synchronize() = 0;

  // A zero-filled tensor in memory the device's kernels use, owned by the device until release() of
  // `owned` (the address release() takes back; null for a tensor of no bytes) or the device's
  // destruction (see KernelExecutor::allocate).
  virtual Result<TensorView> allocate(DType dtype, const Shape& shape, void*& owned) = 0;
  virtual Status release(void* p) = 0;
  virtual Status copy_to_device(void* dst, const void* src, uint64_t bytes) = 0;
  virtual Status copy_to_host(void* dst, const void* src, uint64_t bytes) = 0;
};

}  // namespace gantry::kernels::internal
