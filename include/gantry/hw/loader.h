// LibraryLoader: the seam between probes and vendor libraries loaded at run time (NVML, Vulkan).
// The real implementation uses dlopen; tests pass fakes whose "symbols" are ordinary functions.
#pragma once

#include <memory>
#include <string_view>

#include "gantry/core/status.h"

namespace gantry::hw {

class DynamicLibrary {
 public:
  virtual ~DynamicLibrary() = default;
  // The address of exported symbol `name`, or nullptr when the library lacks it.
  virtual void* symbol(const char* name) const = 0;
};

class LibraryLoader {
 public:
  virtual ~LibraryLoader() = default;
  // Opens `soname` ("libnvidia-ml.so.1"); Unavailable (with the loader's reason) when absent.
  virtual Result<std::unique_ptr<DynamicLibrary>> open(std::string_view soname) const = 0;
};

// dlopen(RTLD_NOW | RTLD_LOCAL). Libraries stay loaded for the life of the process: vendor drivers
// register exit handlers, and unloading them is a known source of crashes at exit.
std::unique_ptr<LibraryLoader> make_dl_loader();

// A loader for which every library is absent (used for a sysroot, which in-process libraries
// cannot describe).
std::unique_ptr<LibraryLoader> make_null_loader();

}  // namespace gantry::hw
