// Compiling kernels without running them: CUDA C++ through NVRTC (no GPU needed), and the on-disk cache
// both the CUDA and the CPU paths share.
//
// NVRTC (libnvrtc.so.13) is loaded with dlopen on first use: from the normal loader path, then from
// /usr/local/cuda/lib64 and /usr/local/cuda/targets/x86_64-linux/lib. Where it is absent every call
// returns Unavailable with the reason, and nothing else in Gantry is affected.
//
// The cache holds one file per compiled kernel, keyed by a hash of the source, the entry, the target
// (arch or compiler), the compiler's version and the options; each file carries its full key and a
// checksum, so a corrupt or colliding entry is recompiled, never used. Writes are atomic (a temporary
// file renamed into place), so concurrent processes sharing a cache are safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/hw/registry.h"

namespace gantry::kernels {

// $GANTRY_KERNEL_CACHE, else $XDG_CACHE_HOME/gantry/kernels, else ~/.cache/gantry/kernels (else a
// directory under the system temp dir when there is no home).
std::filesystem::path default_cache_dir();

// The architecture Gantry compiles for on `device`: compute capability "9.0" -> "sm_90a" (Hopper's
// arch-specific features: wgmma, TMA), any other "X.Y" -> "sm_XY". InvalidArgument when the device has
// no compute capability (not an NVIDIA GPU, or the driver did not report it).
Result<std::string> cuda_arch_for(const hw::Device& device);

enum class CudaOutput { kCubin, kPtx };

struct CudaCompileOptions {
  std::string arch = "sm_90a";             // "sm_XY[a]" (cubin) or "compute_XY[a]" (PTX only)
  CudaOutput output = CudaOutput::kCubin;  // kPtx compiles for the virtual arch compute_XY[a]
  std::vector<std::string> flags;          // extra NVRTC options ("-DTILE=16", "--use_fast_math")
  std::string source_name = "kernel.cu";   // the file name compiler messages carry
  std::filesystem::path cache_dir;         // empty: default_cache_dir()
  bool use_cache = true;
};

struct CompiledKernel {
  std::string binary;  // cubin (ELF) or PTX text
  CudaOutput output = CudaOutput::kCubin;
  std::string arch;          // as compiled for
  std::string lowered_name;  // the entry's symbol in the binary (mangled unless extern "C")
  std::string log;           // the compiler's log (warnings), may be empty
  std::string compiler;      // "NVRTC 13.0"
  double compile_ms = 0;     // 0 on a cache hit
  bool cache_hit = false;
};

// NVRTC's version ("13.0"), or Unavailable with why NVRTC cannot be loaded.
Result<std::string> nvrtc_version();

// Compiles `entry` of the CUDA C++ `source`. A compile error is InvalidArgument whose message holds the
// compiler's log (file:line: error ...).
Result<CompiledKernel> compile_cuda(std::string_view source, std::string_view entry,
                                    const CudaCompileOptions& options);

}  // namespace gantry::kernels
