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
ProbeOutput probe_accel(
    const Machine& m);  // /sys/class/accel: Intel NPU, AMD XDNA, qaic, Gaudi; device nodes
// Graphcore, Groq, Cerebras, Samsung and MediaTek NPUs from their device nodes (device_node_probe.cpp).
void probe_device_nodes(const Machine& m, ProbeOutput& out);
ProbeOutput probe_tpu(const Machine& m, const std::vector<PciDevice>& pci);
ProbeOutput probe_neuron(const Machine& m, const std::vector<PciDevice>& pci);
ProbeOutput probe_vulkan(const LibraryLoader& loader);

// System I/O (sysio_probe.cpp): sysfs block devices, network and RDMA devices, host memory bandwidth.
std::vector<BlockDevice> probe_storage(const Machine& m, std::vector<std::string>& warnings);
std::optional<BlockDevice> read_block_device(const Machine& m, const std::string& name,
                                             std::vector<std::string>& warnings);
void probe_network(const Machine& m, SystemIo& io, std::vector<std::string>& warnings);
HostMemoryBandwidth probe_host_memory(const Machine& m, const CpuInfo& cpu,
                                      std::vector<std::string>& warnings);
// The last PCI address in a sysfs path ("../devices/pci0000:00/0000:00:1d.0/0000:3b:00.0/nvme/nvme0").
std::optional<std::string> pci_bus_id_in_path(std::string_view sysfs_path);

// topology.cpp: PCIe/memory bandwidth figures of each device (the CPU takes `host`), and the peer matrix.
void annotate_bandwidth(std::vector<Device>& devices, const HostMemoryBandwidth& host);
std::vector<PeerLink> compute_peers(const Machine& m, const std::vector<Device>& devices);

// Model-name tables used when no vendor library is there to ask (sysfs/procfs fallbacks).
std::optional<std::string> nvidia_compute_capability_for_name(std::string_view name);

}  // namespace gantry::hw::internal
