// The CPU half of the kernel executor: the system compiler turns a C/C++ kernel into a cached shared
// object (with a generated trampoline that unpacks the argument array), and a thread pool runs its
// blocks.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/core/tensor.h"
#include "gantry/kernels/signature.h"
#include "kernels/kernel_device.h"

namespace gantry::kernels::internal {

// The declarations every CPU kernel sees before its first line (docs/kernels.md shows it).
extern const char* const kCpuPrelude;

// The entry point the trampoline exports: `gantry_launch_<entry>(ctx, args)`; args[i] points to the i-th
// argument's value (a pointer for a tensor).
struct CpuContext {
  uint32_t grid_dim[3];
  uint32_t block_dim[3];
  uint32_t block_idx[3];
  void* shared;
  uint64_t shared_bytes;
};
using CpuEntry = void (*)(const CpuContext*, void**);

struct CpuBinary {
  std::filesystem::path so_path;
  std::string log;
  std::string compiler;  // "c++ (GCC) 12.2.0"
  double compile_ms = 0;
  bool cache_hit = false;
  uint64_t size = 0;
};

// Compiles `source` (C when source_name ends in ".c", C++ otherwise) with the compiler from PATH, or
// takes it from the cache in `cache_dir`. Unavailable without a compiler; InvalidArgument with the
// compiler's output (file:line: error) when it fails.
Result<CpuBinary> compile_cpu(std::string_view source, const KernelSignature& signature,
                              const std::string& source_name, const std::vector<std::string>& flags,
                              const std::filesystem::path& cache_dir, bool use_cache);

// Finds `name` in PATH; empty when absent.
std::filesystem::path find_in_path(std::string_view name);

// Runs blocks on worker threads (the caller's thread included). One run() at a time.
class BlockRunner {
 public:
  explicit BlockRunner(unsigned threads);
  ~BlockRunner();
  unsigned threads() const { return static_cast<unsigned>(workers_.size()) + 1; }
  // Calls fn(worker, block) for every block in [0, blocks); worker is in [0, threads()).
  void run(uint64_t blocks, const std::function<void(unsigned, uint64_t)>& fn);

 private:
  void work(unsigned worker);
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(unsigned, uint64_t)>* job_ = nullptr;
  uint64_t blocks_ = 0;
  std::atomic<uint64_t> next_{0};
  unsigned busy_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

// The CPU as a kernel device: kernels compiled by the system compiler and dlopen'ed; a launch runs its
// blocks on a BlockRunner (made at the first launch), one launch at a time.
class CpuDevice final : public KernelDevice {
 public:
  // `threads`: launch workers; 0 = hardware concurrency.
  explicit CpuDevice(unsigned threads);
  ~CpuDevice() override;

  const std::string& name() const override { return name_; }
  Status usable() const override;
  std::string default_source_name() const override { return "kernel.cpp"; }
  Result<std::unique_ptr<DeviceKernel>> load(std::string_view source, KernelInfo info,
                                             const std::string& source_name, const KernelOptions& options,
                                             const std::filesystem::path& cache_dir) override;
  std::optional<std::string> launch_limits(Dim3 grid, uint64_t shared_bytes) const override;
  std::optional<std::string> memory_problem(const ConstTensorView& t) const override;
  Status launch(DeviceKernel& kernel, Dim3 grid, Dim3 block, uint64_t shared_bytes, void* stream,
                void** args) override;
  Status synchronize() override { return Status::Ok(); }  // launches are synchronous
  Result<TensorView> allocate(DType dtype, const Shape& shape, void*& owned) override;
  Status release(void* p) override;
  Status copy_to_device(void* dst, const void* src, uint64_t bytes) override;
  Status copy_to_host(void* dst, const void* src, uint64_t bytes) override;

 private:
  class Kernel;
  const std::string name_ = "cpu";
  unsigned threads_;
  std::mutex mu_;  // one launch at a time; no unload during a launch
  std::unique_ptr<BlockRunner> runner_;
  std::vector<std::vector<std::byte>> scratch_;  // per worker: its block's local memory
  std::mutex allocations_mu_;
  std::map<void*, Tensor> allocations_;  // allocate()'s tensors by address, until release()
};

}  // namespace gantry::kernels::internal
