#include "probe_util.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>

namespace gantry::hw::internal {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && (std::isspace(static_cast<unsigned char>(s.back())) || s.back() == '\0'))
    s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    const size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::optional<uint64_t> parse_u64(std::string_view s) {
  s = trim(s);
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<int64_t> parse_i64(std::string_view s) {
  s = trim(s);
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<uint64_t> parse_hex(std::string_view s) {
  s = trim(s);
  if (starts_with(s, "0x") || starts_with(s, "0X")) s.remove_prefix(2);
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<std::string> read_text(const Machine& m, std::string_view path,
                                     std::vector<std::string>& warnings) {
  auto r = m.read_file(path);
  if (!r.ok()) {
    if (r.status().code() != StatusCode::kNotFound) warnings.push_back(r.status().message());
    return std::nullopt;
  }
  return std::string(trim(*r));
}

std::optional<uint64_t> read_u64(const Machine& m, std::string_view path,
                                 std::vector<std::string>& warnings) {
  auto text = read_text(m, path, warnings);
  if (!text) return std::nullopt;
  auto v = parse_u64(*text);
  if (!v)
    warnings.push_back("unexpected content in " + std::string(path) + ": '" + text->substr(0, 40) + "'");
  return v;
}

std::vector<std::string> list(const Machine& m, std::string_view path, std::vector<std::string>& warnings) {
  auto r = m.list_dir(path);
  if (!r.ok()) {
    if (r.status().code() != StatusCode::kNotFound) warnings.push_back(r.status().message());
    return {};
  }
  return std::move(r).value();
}

std::map<std::string, std::string> parse_key_values(std::string_view text, char sep) {
  std::map<std::string, std::string> out;
  for (std::string_view line : split(text, '\n')) {
    line = trim(line);
    const size_t pos = line.find(sep);
    if (line.empty() || pos == std::string_view::npos) continue;
    out[std::string(trim(line.substr(0, pos)))] = std::string(trim(line.substr(pos + 1)));
  }
  return out;
}

std::optional<std::string> normalize_pci_bus_id(std::string_view id) {
  id = trim(id);
  // domain:bus:device.function, domain of 4 or 8 hex digits.
  const auto parts = split(id, ':');
  if (parts.size() != 3) return std::nullopt;
  const auto devfn = split(parts[2], '.');
  if (devfn.size() != 2) return std::nullopt;
  auto domain = parse_hex(parts[0]);
  auto bus = parse_hex(parts[1]);
  auto dev = parse_hex(devfn[0]);
  auto fn = parse_hex(devfn[1]);
  if (!domain || !bus || !dev || !fn || *domain > 0xffff || *bus > 0xff || *dev > 0x1f || *fn > 7)
    return std::nullopt;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", static_cast<unsigned>(*domain),
                static_cast<unsigned>(*bus), static_cast<unsigned>(*dev), static_cast<unsigned>(*fn));
  return std::string(buf);
}

std::vector<PciDevice> scan_pci(const Machine& m, std::vector<std::string>& warnings) {
  std::vector<PciDevice> out;
  for (const std::string& name : list(m, "/sys/bus/pci/devices", warnings)) {
    auto bus_id = normalize_pci_bus_id(name);
    if (!bus_id) continue;
    const std::string dir = "/sys/bus/pci/devices/" + name;
    PciDevice d;
    d.bus_id = *bus_id;
    // One read of uevent (PCI_ID, PCI_CLASS, DRIVER) instead of three files per device.
    if (auto uevent = m.read_file(dir + "/uevent"); uevent.ok()) {
      auto kv = parse_key_values(*uevent, '=');
      const auto ids = split(kv["PCI_ID"], ':');
      auto vendor = ids.size() == 2 ? parse_hex(ids[0]) : std::nullopt;
      auto device = ids.size() == 2 ? parse_hex(ids[1]) : std::nullopt;
      auto cls = parse_hex(kv["PCI_CLASS"]);
      if (vendor && device && cls) {
        d.vendor = static_cast<uint32_t>(*vendor);
        d.device = static_cast<uint32_t>(*device);
        d.class_code = static_cast<uint32_t>(*cls);
        if (!kv["DRIVER"].empty()) d.driver = kv["DRIVER"];
        out.push_back(std::move(d));
        continue;
      }
    }
    auto vendor_text = m.read_file(dir + "/vendor");
    if (!vendor_text.ok()) {
      if (vendor_text.status().code() == StatusCode::kNotFound) {
        warnings.push_back("PCI device " + name + " disappeared while probing");
      } else {
        warnings.push_back(vendor_text.status().message());
      }
      continue;
    }
    auto vendor = parse_hex(*vendor_text);
    auto device = parse_hex(read_text(m, dir + "/device", warnings).value_or(""));
    auto cls = parse_hex(read_text(m, dir + "/class", warnings).value_or(""));
    if (!vendor || !device || !cls) {
      warnings.push_back("PCI device " + name + " has unreadable vendor/device/class; skipped");
      continue;
    }
    d.vendor = static_cast<uint32_t>(*vendor);
    d.device = static_cast<uint32_t>(*device);
    d.class_code = static_cast<uint32_t>(*cls);
    d.driver = pci_driver(m, d, warnings);
    out.push_back(std::move(d));
  }
  return out;
}

std::optional<std::string> pci_driver(const Machine& m, const PciDevice& d,
                                      std::vector<std::string>& warnings) {
  auto text = read_text(m, d.path() + "/uevent", warnings);
  if (!text) return std::nullopt;
  auto kv = parse_key_values(*text, '=');
  auto it = kv.find("DRIVER");
  if (it == kv.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

std::optional<int> pcie_generation_from_speed(std::string_view speed) {
  const auto gts = parse_u64(split(trim(speed), '.')[0].substr(0, 2));
  if (!gts) {
    auto first = split(trim(speed), ' ')[0];
    if (first == "2.5") return 1;
    return std::nullopt;
  }
  switch (*gts) {
    case 2:
      return 1;
    case 5:
      return 2;
    case 8:
      return 3;
    case 16:
      return 4;
    case 32:
      return 5;
    case 64:
      return 6;
    default:
      return std::nullopt;
  }
}

void fill_from_pci_sysfs(const Machine& m, Device& d, std::vector<std::string>& warnings) {
  if (!d.pci_bus_id) return;
  const std::string dir = "/sys/bus/pci/devices/" + *d.pci_bus_id;
  if (!d.numa_node) {
    if (auto t = read_text(m, dir + "/numa_node", warnings)) {
      auto v = parse_i64(*t);
      if (v && *v >= 0) d.numa_node = static_cast<int>(*v);  // -1: no NUMA affinity
    }
  }
  if (!d.pcie_generation) {
    if (auto t = read_text(m, dir + "/current_link_speed", warnings))
      d.pcie_generation = pcie_generation_from_speed(*t);
  }
  if (!d.pcie_width) {
    if (auto t = read_text(m, dir + "/current_link_width", warnings)) {
      if (auto v = parse_u64(*t); v && *v > 0 && *v <= 32) d.pcie_width = static_cast<int>(*v);
    }
  }
  if (!d.pci_vendor_id) {
    if (auto t = read_text(m, dir + "/vendor", warnings)) {
      if (auto v = parse_hex(*t)) d.pci_vendor_id = static_cast<uint32_t>(*v);
    }
  }
  if (!d.pci_device_id) {
    if (auto t = read_text(m, dir + "/device", warnings)) {
      if (auto v = parse_hex(*t)) d.pci_device_id = static_cast<uint32_t>(*v);
    }
  }
}

}  // namespace gantry::hw::internal
