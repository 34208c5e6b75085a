// Helpers shared by the probes: tolerant reads through a Machine, number parsing, PCI scanning.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/hw/machine.h"
#include "gantry/hw/registry.h"

namespace gantry::hw::internal {

// What one probe found. Warnings say what could not be read and why.
struct ProbeOutput {
  std::vector<Device> devices;
  std::vector<Device> unavailable;  // seen but unusable here, each with its unavailable_reason
  std::vector<std::string> warnings;
};

std::string_view trim(std::string_view s);
std::vector<std::string_view> split(std::string_view s, char sep);
bool starts_with(std::string_view s, std::string_view prefix);
std::string to_lower(std::string_view s);

std::optional<uint64_t> parse_u64(std::string_view s);  // decimal, surrounding blanks allowed
std::optional<int64_t> parse_i64(std::string_view s);
std::optional<uint64_t> parse_hex(std::string_view s);  // "0x10de" or "10de"

// The trimmed content of `path`; nullopt when absent. Any other failure (permission denied, I/O)
// also yields nullopt and appends a warning naming the file.
std::optional<std::string> read_text(const Machine& m, std::string_view path,
                                     std::vector<std::string>& warnings);
std::optional<uint64_t> read_u64(const Machine& m, std::string_view path, std::vector<std::string>& warnings);

// Directory entries; empty when absent (a warning for other failures).
std::vector<std::string> list(const Machine& m, std::string_view path, std::vector<std::string>& warnings);

// "KEY=VALUE" lines (uevent) or "key value" lines (kfd properties) into a map.
std::map<std::string, std::string> parse_key_values(std::string_view text, char sep);

// "0000:1B:00.0" -> "0000:1b:00.0"; "00000000:1B:00.0" (NVML) -> "0000:1b:00.0". nullopt if malformed.
std::optional<std::string> normalize_pci_bus_id(std::string_view id);

struct PciDevice {
  std::string bus_id;  // normalized
  uint32_t vendor = 0;
  uint32_t device = 0;
  uint32_t class_code = 0;  // 24-bit: 0x030200 = 3D controller
  std::optional<int> numa_node;
  std::optional<std::string> driver;  // uevent DRIVER=; nullopt when unbound
  std::string path() const { return "/sys/bus/pci/devices/" + bus_id; }
};

// Every PCI function under /sys/bus/pci/devices. A device that vanishes between listing and
// reading is skipped with a warning.
std::vector<PciDevice> scan_pci(const Machine& m, std::vector<std::string>& warnings);

// DRIVER= from the device's uevent file; nullopt when unbound or unreadable. (scan_pci fills
// PciDevice::driver already; this is for devices found another way.)
std::optional<std::string> pci_driver(const Machine& m, const PciDevice& d,
                                      std::vector<std::string>& warnings);

// Fills numa_node/pcie fields of `d` from sysfs for its pci_bus_id (when known and not yet set).
void fill_from_pci_sysfs(const Machine& m, Device& d, std::vector<std::string>& warnings);

// PCIe generation from sysfs current_link_speed ("16.0 GT/s PCIe").
std::optional<int> pcie_generation_from_speed(std::string_view speed);

}  // namespace gantry::hw::internal
