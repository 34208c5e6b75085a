// KernelExecutor: compiles, caches, loads and launches user kernels on the CPU or a CUDA GPU through one
// interface (docs/kernels.md has the conventions and examples).
//
//   KernelExecutor ex;
//   auto h = ex.load(source, "saxpy", "cpu");            // or "cuda:0"
//   ex.launch(*h, {KernelArg::f32(2.f), KernelArg::tensor(x), KernelArg::tensor(y), KernelArg::i32(n)},
//             {n / 256 + 1}, {256});
//
// - "cpu": C or C++ source compiled by the system compiler (c++ or cc from PATH, -O2 -fPIC -shared) into
//   a cached shared object and dlopen'ed. The entry takes `const gantry_kernel_ctx* ctx` first and is
//   called once per block, on a thread pool; it loops over the block's threads itself
//   (GANTRY_FOR_EACH_THREAD). Tensors are host memory. No compiler -> Unavailable with that reason.
// - "cuda:N": CUDA C++ compiled by NVRTC for the device's architecture (cuda_arch_for), cached as a
//   cubin, loaded with the driver API (libcuda.so.1, dlopen'ed once by memory/). Tensors are device
//   memory from the executor's block pool (allocate()); launches are asynchronous on `stream` until
//   synchronize(). No driver/GPU -> Unavailable with the reason.
// - Every launch is checked against the kernel's signature (parsed from the source, signature.h) first:
//   a wrong argument count, a scalar of the wrong type, a tensor of the wrong dtype or device, a zero or
//   oversized grid/block is InvalidArgument and nothing runs.
// - A CUDA kernel that faults leaves the context unusable (CUDA's rule): the launch or the next
//   synchronize() fails with the driver's error and every later call on that device fails with
//   FailedPrecondition saying so; the CPU device and other GPUs stay usable.
// Thread-safe: one executor may be shared; launches on the CPU device run one at a time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/core/tensor.h"
#include "gantry/hw/registry.h"
#include "gantry/kernels/compile.h"
#include "gantry/kernels/signature.h"

namespace gantry::memory {
class BlockPool;
}

namespace gantry::kernels {

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
  uint64_t count() const { return uint64_t{x} * y * z; }
  std::string to_string() const;  // "4,1,1"
};
// "256" / "16,16" / "8,8,4" (missing ones are 1).
Result<Dim3> parse_dim3(std::string_view text);

struct KernelHandle {
  uint64_t id = 0;  // 0 is never a loaded kernel
  bool operator==(const KernelHandle&) const = default;
};

// One launch argument. A tensor argument borrows the tensor's elements (a Tensor, or a view from
// KernelExecutor::allocate, converts): their owner must outlive the launch (on CUDA, until synchronize()).
// The kernel may write into them wherever its signature's pointer is not const.
class KernelArg {
 public:
  enum class Kind { kTensor, kBuffer, kScalar, kLocalMemory };

  static KernelArg tensor(ConstTensorView t);
  // Raw memory: `bytes` bytes at `data` (ferrum's Buffer{ptr, size}), borrowed like a tensor, in host
  // memory or on CUDA device `device_id`. It fits any pointer parameter: a void* one as it is, a typed one
  // when `bytes` is a whole number of its elements (a 10-byte buffer is refused for a float*).
  static KernelArg buffer(const void* data, uint64_t bytes, MemoryClass memory = MemoryClass::kHost,
                          int device_id = -1);
  static KernelArg boolean(bool v);
  static KernelArg i8(int8_t v);
  static KernelArg u8(uint8_t v);
  static KernelArg i16(int16_t v);
  static KernelArg u16(uint16_t v);
  static KernelArg i32(int32_t v);
  static KernelArg i64(int64_t v);
  static KernelArg u32(uint32_t v);
  static KernelArg u64(uint64_t v);
  static KernelArg f32(float v);
  static KernelArg f64(double v);
  // Dynamic local (CUDA: shared) memory of `bytes` per block. It is no kernel parameter: the bytes are
  // added to launch()'s shared_bytes, the kernel reaches them through `extern __shared__` (CUDA) or
  // ctx->shared (CPU).
  static KernelArg local_memory(uint64_t bytes);
  // Parses "f32:2.0", "i32:-3", "u8:255", "u64:7", "bool:true" (the CLI's scalar form); a value out of
  // the type's range is an error, never truncated.
  static Result<KernelArg> parse_scalar(std::string_view text);

  Kind kind() const { return kind_; }
  const ConstTensorView& tensor_value() const { return tensor_; }  // a buffer: u8 [bytes]
  ScalarType scalar_type() const { return scalar_; }
  const void* scalar_bytes() const { return &bits_; }  // scalar_size(scalar_type()) bytes
  uint64_t local_bytes() const { return local_; }
  uint64_t buffer_bytes() const { return buffer_bytes_; }  // a buffer's size, as given
  // "f32 2", "f32 tensor [1024] on cuda:0", "buffer of 10 B on host", "local memory 4096 B"
  std::string describe() const;

 private:
  Kind kind_ = Kind::kScalar;
  ConstTensorView tensor_;
  ScalarType scalar_ = ScalarType::kI32;
  uint64_t bits_ = 0;  // the scalar's bytes, little-endian at offset 0
  uint64_t local_ = 0;
  uint64_t buffer_bytes_ = 0;
};

struct KernelOptions {
  std::vector<std::string> flags;  // extra compiler flags (NVRTC options, or c++/cc flags)
  std::string source_name;         // file name for messages and the language ("x.c" is C); default by device
  std::string arch;                // CUDA: override the device's arch ("sm_90")
  // The entry's parameter list when the source does not show it plainly ("const float* x, int n"); the
  // CPU convention's ctx parameter is not part of it.
  std::optional<std::string> signature;
  bool use_cache = true;
};

struct KernelInfo {
  std::string entry;
  std::string device;  // "cpu", "cuda:0"
  std::string target;  // "sm_90a", or "x86_64 c++ (GCC 12.2.0)"
  KernelSignature signature;
  int registers = 0;                 // per thread (CUDA); 0 on the CPU
  uint64_t static_shared_bytes = 0;  // CUDA __shared__ arrays; 0 on the CPU
  uint64_t local_bytes = 0;          // per thread local memory (spills, CUDA); 0 on the CPU
  int max_threads_per_block = 0;     // CUDA: this kernel's limit; CPU: 1024 (Gantry's convention)
  // The block size to launch with when the caller has no reason to pick another. CUDA: the driver's
  // occupancy calculator (cuOccupancyMaxPotentialBlockSize), the smallest block reaching the highest
  // occupancy for this kernel's registers and static shared memory; CPU: 256, Gantry's convention (a
  // block is one task on the launch pool: 256 threads amortise its dispatch, and a grid of n/256 blocks
  // still spreads over the workers).
  int preferred_block_size = 0;
  uint64_t binary_bytes = 0;  // cubin / shared object size
  std::string compile_log;
  double compile_ms = 0;  // 0 when it came from the cache
  bool cache_hit = false;
  std::filesystem::path cache_file;  // where the binary is cached (empty when the cache is off)
};

struct ExecutorOptions {
  std::filesystem::path cache_dir;  // empty: default_cache_dir()
  // The machine: the CUDA arch comes from its devices' compute capability. Unset: hw::detect_local()
  // runs the first time a CUDA device is used (the driver's own numbers are used when it has no entry).
  std::optional<hw::Registry> registry;
  // Device memory for allocate() on CUDA devices; the executor makes its own pool over the device's
  // VMM backing for any device not given here. Pools must outlive the executor.
  std::vector<memory::BlockPool*> pools;
  unsigned cpu_threads = 0;  // CPU launch workers; 0 = hardware concurrency
};

class KernelExecutor {
 public:
  explicit KernelExecutor(ExecutorOptions options = {});
  ~KernelExecutor();
  KernelExecutor(const KernelExecutor&) = delete;
  KernelExecutor& operator=(const KernelExecutor&) = delete;

  // OK when kernels can run on `device` ("cpu", "cuda:0"), else Unavailable with the reason (no
  // compiler, no libnvrtc.so.13, no libcuda.so.1, no such GPU).
  Status available(std::string_view device);

  // Compiles (or takes from the cache) and loads `entry` of `source` for `device`. Compile errors are
  // InvalidArgument holding the compiler's log with line numbers.
  Result<KernelHandle> load(std::string_view source, std::string_view entry, std::string_view device,
                            const KernelOptions& options = {});
  // Checks `args` against the signature, then launches. `stream` is a CUstream on CUDA (nullptr: the
  // default stream) and ignored on the CPU (launches there are synchronous).
  Status launch(KernelHandle handle, std::span<const KernelArg> args, Dim3 grid, Dim3 block,
                uint64_t shared_bytes = 0, void* stream = nullptr);
  Result<KernelInfo> info(KernelHandle handle) const;
  Status unload(KernelHandle handle);

  // Waits for every launch on `device` to finish; reports a fault of an earlier asynchronous launch.
  Status synchronize(std::string_view device);

  // A zero-filled tensor on `device`, borrowed from the executor, which owns its memory until release()
  // or the executor's destruction (every view of it then dangles): host memory for "cpu"; for CUDA memory
  // from the device's block pool (MemoryClass kDevice).
  Result<TensorView> allocate(std::string_view device, DType dtype, const Shape& shape);
  // Frees the memory of a tensor from allocate(); a host tensor that did not come from allocate() is left
  // alone. InvalidArgument for device memory this executor did not allocate (or released already).
  Status release(ConstTensorView allocated);
  // Copies between a host tensor and a tensor from allocate() (same dtype and element count).
  Status copy_to_device(ConstTensorView host, TensorView device_tensor);
  // An owning host copy of a tensor from allocate() (or of a host tensor).
  Result<Tensor> copy_to_host(ConstTensorView device_tensor);

  const std::filesystem::path& cache_dir() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gantry::kernels
