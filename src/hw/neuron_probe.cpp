// AWS Inferentia/Trainium: PCI functions of vendor 0x1d0f with a Neuron device id, else /dev/neuronN;
// NeuronCore counts from /sys/class/neuron_device.
#include <algorithm>

#include "probes.h"

namespace gantry::hw::internal {
namespace {

constexpr uint32_t kAmazonVendor = 0x1d0f;

std::optional<std::string> neuron_name(uint32_t device) {
  switch (device) {
    case 0x7064:
      return "AWS Inferentia";
    case 0x7164:
      return "AWS Trainium";
    case 0x7264:
      return "AWS Inferentia2";
    case 0x7364:
      return "AWS Trainium2";
    default:
      return std::nullopt;
  }
}

}  // namespace

ProbeOutput probe_neuron(const Machine& m, const std::vector<PciDevice>& pci) {
  ProbeOutput out;
  for (const PciDevice& p : pci) {
    if (p.vendor != kAmazonVendor) continue;
    auto name = neuron_name(p.device);
    if (!name) continue;  // ENA, NVMe and other Nitro devices
    Device d;
    d.kind = DeviceKind::kAsic;
    d.family = std::string(kFamilyNeuron);
    d.vendor = "aws";
    d.sources = {"sysfs"};
    d.name = *name;
    d.pci_bus_id = p.bus_id;
    out.devices.push_back(std::move(d));
  }
  if (out.devices.empty()) {
    for (const std::string& name : list(m, "/dev", out.warnings)) {
      if (!starts_with(name, "neuron") || !parse_u64(std::string_view(name).substr(6))) continue;
      Device d;
      d.kind = DeviceKind::kAsic;
      d.family = std::string(kFamilyNeuron);
      d.vendor = "aws";
      d.sources = {"dev"};
      d.name = "AWS Neuron device";
      out.devices.push_back(std::move(d));
    }
  }
  if (out.devices.empty()) return out;
  const auto driver = read_text(m, "/sys/module/neuron/version", out.warnings);
  for (size_t i = 0; i < out.devices.size(); ++i) {
    Device& d = out.devices[i];
    d.driver_version = driver;
    const std::string dir = "/sys/class/neuron_device/neuron" + std::to_string(i);
    if (auto cores = read_u64(m, dir + "/core_count", out.warnings)) d.cores = static_cast<int>(*cores);
    fill_from_pci_sysfs(m, d, out.warnings);
  }
  return out;
}

}  // namespace gantry::hw::internal
