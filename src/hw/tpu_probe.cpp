// Google TPUs: PCI functions of vendor 0x1ae0 with a TPU device id, else /dev/accelN chip nodes
// (TPU VMs expose each chip as /dev/accel0.., unlike the kernel accel class's /dev/accel/accelN).
#include <algorithm>

#include "probes.h"

namespace gantry::hw::internal {
namespace {

constexpr uint32_t kGoogleVendor = 0x1ae0;

std::optional<std::string> tpu_name(uint32_t device) {
  switch (device) {
    case 0x0027:
      return "Google TPU v2";
    case 0x0056:
      return "Google TPU v3";
    case 0x005e:
      return "Google TPU v4";
    case 0x0062:
      return "Google TPU v5p";
    case 0x0063:
      return "Google TPU v5e";
    case 0x006f:
      return "Google TPU v6e";
    default:
      return std::nullopt;
  }
}

}  // namespace

ProbeOutput probe_tpu(const Machine& m, const std::vector<PciDevice>& pci) {
  ProbeOutput out;
  for (const PciDevice& p : pci) {
    if (p.vendor != kGoogleVendor) continue;
    auto name = tpu_name(p.device);
    if (!name) continue;  // gVNIC and other Google virtual devices
    Device d;
    d.kind = DeviceKind::kTpu;
    d.family = std::string(kFamilyTpu);
    d.vendor = "google";
    d.sources = {"sysfs"};
    d.name = *name;
    d.pci_bus_id = p.bus_id;
    d.pci_vendor_id = p.vendor;
    d.pci_device_id = p.device;
    fill_from_pci_sysfs(m, d, out.warnings);
    out.devices.push_back(std::move(d));
  }
  if (!out.devices.empty()) return out;
  for (const std::string& name : list(m, "/dev", out.warnings)) {
    if (!starts_with(name, "accel") || !parse_u64(std::string_view(name).substr(5))) continue;
    Device d;
    d.kind = DeviceKind::kTpu;
    d.family = std::string(kFamilyTpu);
    d.vendor = "google";
    d.sources = {"dev"};
    d.name = "Google TPU";
    out.devices.push_back(std::move(d));
  }
  return out;
}

}  // namespace gantry::hw::internal
