// Devices of the kernel's compute-accelerator class (/sys/class/accel) and Habana's own class:
// Intel NPU (intel_vpu), AMD XDNA (amdxdna), Qualcomm Cloud AI (qaic), Habana Gaudi (habanalabs); then
// the accelerators seen only as device nodes (device_node_probe.cpp).
#include <cstdio>

#include "probes.h"

namespace gantry::hw::internal {
namespace {

std::string hex_name(std::string_view prefix, std::optional<uint32_t> device) {
  if (!device) return std::string(prefix);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*s 0x%04x", static_cast<int>(prefix.size()), prefix.data(), *device);
  return buf;
}

std::string npu_name(std::string_view driver, std::optional<uint32_t> id) {
  if (driver == "intel_vpu") {
    switch (id.value_or(0)) {
      case 0x7d1d:
        return "Intel NPU (Meteor Lake)";
      case 0xad1d:
        return "Intel NPU (Arrow Lake)";
      case 0x643e:
        return "Intel NPU (Lunar Lake)";
      case 0xb03e:
        return "Intel NPU (Panther Lake)";
      default:
        return hex_name("Intel NPU", id);
    }
  }
  if (driver == "amdxdna") {
    switch (id.value_or(0)) {
      case 0x1502:
        return "AMD XDNA NPU (Phoenix)";
      case 0x17f0:
        return "AMD XDNA 2 NPU (Strix)";
      default:
        return hex_name("AMD XDNA NPU", id);
    }
  }
  if (driver == "qaic") {
    if (id == 0xa100u) return "Qualcomm Cloud AI 100";
    return hex_name("Qualcomm Cloud AI", id);
  }
  return hex_name("accelerator", id);
}

std::string gaudi_name(std::optional<std::string> type, std::optional<uint32_t> id) {
  if (type && !type->empty()) {
    std::string t = to_lower(*type);  // "GAUDI2" -> "Habana Gaudi2"
    if (starts_with(t, "gaudi")) return "Habana Gaudi" + t.substr(5);
    return "Habana " + *type;
  }
  switch (id.value_or(0)) {
    case 0x1010:
      return "Habana Gaudi";
    case 0x1020:
      return "Habana Gaudi2";
    case 0x1030:
      return "Habana Gaudi3";
    default:
      return hex_name("Habana accelerator", id);
  }
}

void add_device(const Machine& m, const std::string& class_dir, const std::string& dev_dir,
                ProbeOutput& out) {
  auto uevent = m.read_file(dev_dir + "/uevent");
  if (!uevent.ok()) {
    if (uevent.status().code() == StatusCode::kNotFound) {
      out.warnings.push_back("accelerator " + class_dir + " disappeared while probing");
    } else {
      out.warnings.push_back(uevent.status().message());
    }
    return;
  }
  auto kv = parse_key_values(*uevent, '=');
  const std::string driver = kv["DRIVER"];
  std::optional<uint32_t> device_id;
  if (auto t = read_text(m, dev_dir + "/device", out.warnings)) {
    if (auto v = parse_hex(*t)) device_id = static_cast<uint32_t>(*v);
  }
  Device d;
  d.sources = {"sysfs"};
  d.pci_device_id = device_id;
  d.pci_bus_id = normalize_pci_bus_id(kv["PCI_SLOT_NAME"]);
  if (driver == "intel_vpu") {
    d.kind = DeviceKind::kNpu, d.family = std::string(kFamilyIntelNpu), d.vendor = "intel";
  } else if (driver == "amdxdna") {
    d.kind = DeviceKind::kNpu, d.family = std::string(kFamilyXdna), d.vendor = "amd";
  } else if (driver == "qaic") {
    d.kind = DeviceKind::kAsic, d.family = std::string(kFamilyQaic), d.vendor = "qualcomm";
  } else if (driver == "habanalabs") {
    d.kind = DeviceKind::kAsic, d.family = std::string(kFamilyGaudi), d.vendor = "habana";
    d.name = gaudi_name(read_text(m, dev_dir + "/device_type", out.warnings), device_id);
    if (!d.pci_bus_id) {
      if (auto a = read_text(m, dev_dir + "/pci_addr", out.warnings)) d.pci_bus_id = normalize_pci_bus_id(*a);
    }
    d.driver_version = read_text(m, dev_dir + "/driver_ver", out.warnings);
    d.memory_total_bytes = read_u64(m, dev_dir + "/dram_size", out.warnings);  // not every driver has it
  } else {
    return;  // TPUs and unknown drivers are handled (or ignored) elsewhere
  }
  if (d.name.empty()) d.name = npu_name(driver, device_id);
  if (!d.driver_version) d.driver_version = read_text(m, "/sys/module/" + driver + "/version", out.warnings);
  fill_from_pci_sysfs(m, d, out.warnings);
  out.devices.push_back(std::move(d));
}

}  // namespace

ProbeOutput probe_accel(const Machine& m) {
  ProbeOutput out;
  for (const std::string& name : list(m, "/sys/class/accel", out.warnings)) {
    add_device(m, name, "/sys/class/accel/" + name + "/device", out);
  }
  // Older habanalabs drivers register /sys/class/habanalabs/hlN with the attributes directly inside.
  for (const std::string& name : list(m, "/sys/class/habanalabs", out.warnings)) {
    if (!starts_with(name, "hl") || starts_with(name, "hl_controlD")) continue;
    const std::string dir = "/sys/class/habanalabs/" + name;
    Device d;
    d.kind = DeviceKind::kAsic, d.family = std::string(kFamilyGaudi), d.vendor = "habana";
    d.sources = {"sysfs"};
    if (auto a = read_text(m, dir + "/pci_addr", out.warnings)) d.pci_bus_id = normalize_pci_bus_id(*a);
    bool seen = false;
    for (const Device& e : out.devices) seen = seen || (d.pci_bus_id && e.pci_bus_id == d.pci_bus_id);
    if (seen) continue;
    d.name = gaudi_name(read_text(m, dir + "/device_type", out.warnings), std::nullopt);
    d.driver_version = read_text(m, dir + "/driver_ver", out.warnings);
    fill_from_pci_sysfs(m, d, out.warnings);
    out.devices.push_back(std::move(d));
  }
  probe_device_nodes(m, out);
  return out;
}

}  // namespace gantry::hw::internal
