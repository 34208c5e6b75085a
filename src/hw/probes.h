// The individual probes detect() runs concurrently. Each reads only through Machine/LibraryLoader.
#pragma once

#include <vector>

#include "gantry/hw/loader.h"
#include "gantry/hw/machine.h"
#include "gantry/hw/registry.h"
#include "probe_util.h"

namespace gantry::hw::internal {

struct CpuProbeOutput {
  CpuInfo cpu;
  HostInfo host;
  bool hypervisor = false;
  std::vector<std::string> warnings;
};

CpuProbeOutput probe_cpu(const Machine& m, bool use_hwloc);
EnvironmentInfo probe_environment(const Machine& m, std::vector<std::string>& warnings);

ProbeOutput probe_nvidia(const Machine& m, const LibraryLoader& loader, const std::vector<PciDevice>& pci);
ProbeOutput probe_amd(const Machine& m, const std::vector<PciDevice>& pci);
ProbeOutput probe_intel_gpu(const Machine& m, const std::vector<PciDevice>& pci);
ProbeOutput probe_accel(const Machine& m);  // /sys/class/accel: Intel NPU, AMD XDNA, qaic, Gaudi
ProbeOutput probe_tpu(const Machine& m, const std::vector<PciDevice>& pci);
ProbeOutput probe_neuron(const Machine& m, const std::vector<PciDevice>& pci);
ProbeOutput probe_vulkan(const LibraryLoader& loader);

// Model-name tables used when no vendor library is there to ask (sysfs/procfs fallbacks).
std::optional<std::string> nvidia_compute_capability_for_name(std::string_view name);

}  // namespace gantry::hw::internal
