// Backing: where a BlockPool gets its blocks from. A backing maps whole blocks (multiples of its
// granularity) and unmaps them; it never sees individual allocations.
//
// - host: anonymous mmap, page aligned (so every offset that is a multiple of 64 is 64-byte aligned),
//   available everywhere.
// - cuda: the driver's virtual-memory API (cuMemAddressReserve + cuMemCreate + cuMemMap +
//   cuMemSetAccess) at the driver's allocation granularity (2 MiB on current GPUs); libcuda.so.1 is
//   loaded with dlopen, so a binary using it starts on machines without a driver.
// Blocks of a device backing are device memory: the pool keeps all its bookkeeping on the host and
// never touches block contents. Implementations are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gantry/core/status.h"

namespace gantry::memory {

struct BackingBlock {
  void* base = nullptr;  // aligned to at least 64 bytes (host: a page; cuda: the granularity)
  uint64_t size = 0;     // a multiple of granularity()
  uint64_t handle = 0;   // the backing's own handle (cuda: the CUmemGenericAllocationHandle)
};

class Backing {
 public:
  virtual ~Backing() = default;
  virtual const std::string& name() const = 0;    // "host", "cuda-vmm"
  virtual const std::string& device() const = 0;  // "cpu", "cuda:0"
  virtual uint64_t granularity() const = 0;       // block sizes are multiples of this
  virtual bool host_accessible() const = 0;       // whether the CPU may read/write block memory
  // Maps a block of `bytes` (a multiple of granularity()). ResourceExhausted when the device has no
  // room, Unavailable when the backing cannot work at all.
  virtual Result<BackingBlock> map(uint64_t bytes) = 0;
  // Returns a block from map(); every pointer into it becomes invalid.
  virtual void unmap(const BackingBlock& block) = 0;
};

// Host memory. `granularity` must be a power of two and a multiple of the page size (rounded up).
std::unique_ptr<Backing> make_host_backing(uint64_t granularity = 2ull << 20);

// CUDA device memory of device `ordinal` through the driver's VMM API. Unavailable (with the reason:
// no libcuda.so.1, cuInit failed, no such device, no VMM support) where it cannot work.
Result<std::unique_ptr<Backing>> make_cuda_backing(int ordinal);

// make_cuda_backing(ordinal), made on the first map() (or granularity()) call: until a block is needed, no
// driver is loaded and no context created. Where the driver cannot work, map() returns make_cuda_backing's
// Unavailable status (every time) and granularity() the usual 2 MiB.
std::unique_ptr<Backing> make_lazy_cuda_backing(int ordinal);

}  // namespace gantry::memory
