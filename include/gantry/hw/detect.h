// detect(): runs every probe concurrently against one Machine and merges what they saw into a
// Registry. Never fails: a probe that errors or throws becomes a warning.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"
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
  // Which probes run (ai-hwaccel's builder: `gantry detect --only cuda,cpu` / `--skip vulkan`), by the
  // names detect_probe_names() lists. `only` empty: every probe (minus use_vulkan false and `skip`). The CPU
  // and host memory are always probed (every plan needs them); "cpu" may be named in `only` for clarity.
  // A probe left out leaves its devices (or, for "io" and "environment", its section) out of the registry.
  std::vector<std::string> only;
  std::vector<std::string> skip;
};

// The probe names DetectOptions::only/skip accept, in the order `gantry detect --help` lists them:
// cpu, cuda, rocm, intel-gpu, accel (Gaudi, Qualcomm AI 100, Intel and AMD NPUs), tpu, neuron, vulkan, io,
// environment. The device families gaudi, qaic, intel-npu and amd-xdna are accepted for accel, and nvidia/amd
// for cuda/rocm.
const std::vector<std::string_view>& detect_probe_names();
// Checks and canonicalises a list of names (split at commas): InvalidArgument naming the unknown one and the
// known ones. `flag` prefixes the message ("--only").
Result<std::vector<std::string>> parse_probe_names(std::string_view list, std::string_view flag);
// Whether probe `name` (canonical) runs under `options`.
bool probe_selected(const DetectOptions& options, std::string_view name);

Registry detect(const Machine& machine, const LibraryLoader& loader, const DetectOptions& options = {});

// This computer, or the tree named by GANTRY_SYSROOT when set (libraries are not loaded then).
Registry detect_local(const DetectOptions& options = {});

// Only the CPU and host memory of `machine` (the CPU probe: /proc/cpuinfo, /proc/meminfo, topology,
// container limits) and the CPU device entry; no accelerator probe runs and no library is loaded.
Registry detect_host(const Machine& machine);

// detect_host on this computer, or on the tree named by GANTRY_SYSROOT when set.
Registry detect_local_host();

}  // namespace gantry::hw
