// The CUDA half of the kernel executor: one CudaDevice per GPU ordinal, over the driver API that
// memory/ loads (memory/cuda_api.h), with device memory from a BlockPool.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "gantry/core/status.h"
#include "gantry/hw/registry.h"
#include "gantry/memory/block_pool.h"
#include "kernels/kernel_device.h"
#include "memory/cuda_api.h"

namespace gantry::kernels::internal {

namespace cu = memory::internal::cu;

// One CUDA GPU as a kernel device: kernels compiled by NVRTC for its arch and loaded with the driver API;
// tensors in memory from its block pool (the one given, else its own over the device's VMM backing).
class CudaDevice final : public KernelDevice {
 public:
  // Unavailable with the reason when the driver or device `ordinal` cannot be used. The arch comes
  // from `device` (the registry's entry) when it has a compute capability, else from the driver.
  static Result<std::unique_ptr<CudaDevice>> open(int ordinal, const hw::Device* device,
                                                  memory::BlockPool* pool);
  ~CudaDevice() override;

  const std::string& name() const override { return id_; }
  const std::string& arch() const { return arch_; }
  // FailedPrecondition once a kernel faulted (the context is lost), OK otherwise.
  Status usable() const override;
  std::string default_source_name() const override { return "kernel.cu"; }
  Result<std::unique_ptr<DeviceKernel>> load(std::string_view source, KernelInfo info,
                                             const std::string& source_name, const KernelOptions& options,
                                             const std::filesystem::path& cache_dir) override;
  std::optional<std::string> launch_limits(Dim3 grid, uint64_t shared_bytes) const override;
  std::optional<std::string> memory_problem(const ConstTensorView& t) const override;
  Status launch(DeviceKernel& kernel, Dim3 grid, Dim3 block, uint64_t shared_bytes, void* stream,
                void** args) override;
  Status synchronize() override;

  Result<TensorView> allocate(DType dtype, const Shape& shape, void*& owned) override;
  Status release(void* p) override;
  Status copy_to_device(void* dst, const void* src, uint64_t bytes) override;
  Status copy_to_host(void* dst, const void* src, uint64_t bytes) override;

 private:
  class Kernel;
  CudaDevice(int ordinal, cu::Context ctx, std::string arch, memory::BlockPool* pool, int max_dynamic_shared);
  Status check(cu::Result r, const std::string& what);  // marks the context lost on a sticky error
  Status pool_ready();

  int ordinal_;
  std::string id_;
  cu::Context ctx_;
  std::string arch_;
  memory::BlockPool* pool_;
  std::unique_ptr<memory::BlockPool> own_pool_;
  int max_dynamic_shared_;
  mutable std::mutex mu_;
  Status lost_;
};

}  // namespace gantry::kernels::internal
