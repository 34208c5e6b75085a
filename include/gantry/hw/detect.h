// detect(): runs every probe concurrently against one Machine and merges what they saw into a
// Registry. Never fails: a probe that errors or throws becomes a warning.
#pragma once

#include "gantry/hw/loader.h"
#include "gantry/hw/machine.h"
#include "gantry/hw/registry.h"

namespace gantry::hw {

struct DetectOptions {
  bool use_vulkan = true;  // creating a Vulkan instance loads every ICD: can cost tens of ms
  bool use_hwloc = false;  // NUMA via hwloc on the local root (sysfs is read otherwise; faster)
  // Library-backed probes (NVML, Vulkan) always run on their own threads when the library loads.
  // Kernel-file probes run on the caller's thread unless this is set (they take microseconds).
  bool parallel_file_probes = false;
};

Registry detect(const Machine& machine, const LibraryLoader& loader, const DetectOptions& options = {});

// This computer, or the tree named by GANTRY_SYSROOT when set (libraries are not loaded then).
Registry detect_local(const DetectOptions& options = {});

// Only the CPU and host memory of `machine` (the CPU probe: /proc/cpuinfo, /proc/meminfo, topology,
// container limits) and the CPU device entry; no accelerator probe runs and no library is loaded.
Registry detect_host(const Machine& machine);

// detect_host on this computer, or on the tree named by GANTRY_SYSROOT when set.
Registry detect_local_host();

}  // namespace gantry::hw
