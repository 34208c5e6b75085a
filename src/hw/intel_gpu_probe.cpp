// Intel GPUs bound to i915 or xe. Integrated GPUs share host memory, so their memory is unknown.
#include <cstdio>

#include "probes.h"

namespace gantry::hw::internal {
namespace {

constexpr uint32_t kIntelVendor = 0x8086;

std::string intel_gpu_name(uint32_t device) {
  switch (device) {
    case 0x56a0:
      return "Intel Arc A770 Graphics";
    case 0x56a1:
      return "Intel Arc A750 Graphics";
    case 0x0bd5:
      return "Intel Data Center GPU Max 1550";
    case 0x0bda:
      return "Intel Data Center GPU Max 1100";
    case 0x7d55:
      return "Intel Arc Graphics (Meteor Lake)";
    case 0x64a0:
      return "Intel Arc 140V Graphics (Lunar Lake)";
    case 0xe20b:
      return "Intel Arc B580 Graphics";
    case 0xa7a0:
      return "Intel Iris Xe Graphics (Raptor Lake)";
    case 0x46a6:
      return "Intel Iris Xe Graphics (Alder Lake)";
    case 0x9a49:
      return "Intel Iris Xe Graphics (Tiger Lake)";
    default: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "Intel GPU 0x%04x", device);
      return buf;
    }
  }
}

}  // namespace

ProbeOutput probe_intel_gpu(const Machine& m, const std::vector<PciDevice>& pci) {
  ProbeOutput out;
  for (const PciDevice& p : pci) {
    if (p.vendor != kIntelVendor || (p.class_code >> 16) != 0x03) continue;
    const auto& driver = p.driver;
    if (driver != "i915" && driver != "xe") continue;
    Device d;
    d.kind = DeviceKind::kGpu;
    d.family = std::string(kFamilyIntelGpu);
    d.vendor = "intel";
    d.sources = {"sysfs"};
    d.pci_bus_id = p.bus_id;
    d.name = intel_gpu_name(p.device);
    d.arch = *driver;  // the kernel driver decides which user-space stack (Level Zero/OpenCL) applies
    fill_from_pci_sysfs(m, d, out.warnings);
    out.devices.push_back(std::move(d));
  }
  return out;
}

}  // namespace gantry::hw::internal
