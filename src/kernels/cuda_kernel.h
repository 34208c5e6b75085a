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
#include "memory/cuda_api.h"

namespace gantry::kernels::internal {

namespace cu = memory::internal::cu;

struct CudaFunctionInfo {
  int registers = 0;
  uint64_t static_shared = 0;
  uint64_t local = 0;
  int max_threads = 0;
};

class CudaDevice {
 public:
  // Unavailable with the reason when the driver or device `ordinal` cannot be used. The arch comes
  // from `device` (the registry's entry) when it has a compute capability, else from the driver.
  static Result<std::unique_ptr<CudaDevice>> open(int ordinal, const hw::Device* device,
                                                  memory::BlockPool* pool);
  ~CudaDevice();

  const std::string& id() const { return id_; }
  const std::string& arch() const { return arch_; }
  // FailedPrecondition once a kernel faulted (the context is lost), OK otherwise.
  Status usable() const;

  Result<cu::Module> load_module(const std::string& cubin, const std::string& symbol, cu::Function& function,
                                 CudaFunctionInfo& info);
  void unload_module(cu::Module module);
  Status launch(cu::Function f, const uint32_t grid[3], const uint32_t block[3], uint64_t shared,
                void* stream, void** params, const std::string& entry);
  Status synchronize();

  Result<void*> allocate(uint64_t bytes);
  Status free(void* p);
  Status copy_to_device(void* dst, const void* src, uint64_t bytes);
  Status copy_to_host(void* dst, const void* src, uint64_t bytes);

 private:
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
