// System I/O from sysfs: block devices (/sys/block), network interfaces (/sys/class/net), RDMA devices
// (/sys/class/infiniband) and the host memory bandwidth (SMBIOS DIMMs, else the CPU platform table).
#include <algorithm>

#include "gantry/hw/bandwidth.h"
#include "probes.h"

namespace gantry::hw::internal {
namespace {

bool skipped_block_device(std::string_view name) {
  for (std::string_view p : {"loop", "ram", "zram"}) {
    if (starts_with(name, p)) return true;
  }
  return false;
}

// A file read where failure is normal (a link that is down refuses `speed` with EINVAL): no warning.
std::optional<std::string> quiet_read(const Machine& m, const std::string& path) {
  auto r = m.read_file(path);
  if (!r.ok()) return std::nullopt;
  return std::string(trim(*r));
}

std::string basename_of(std::string_view path) {
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  const size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

// PCI_SLOT_NAME from `dir`/uevent (sysfs device directories of PCI functions carry it).
std::optional<std::string> pci_slot_of(const Machine& m, const std::string& dir) {
  auto text = quiet_read(m, dir + "/uevent");
  if (!text) return std::nullopt;
  auto kv = parse_key_values(*text, '=');
  if (auto it = kv.find("PCI_SLOT_NAME"); it != kv.end()) return normalize_pci_bus_id(it->second);
  return std::nullopt;
}

std::optional<std::string> driver_of(const Machine& m, const std::string& device_dir) {
  if (auto text = quiet_read(m, device_dir + "/uevent")) {
    auto kv = parse_key_values(*text, '=');
    if (auto it = kv.find("DRIVER"); it != kv.end() && !it->second.empty()) return it->second;
  }
  if (auto link = m.read_link(device_dir + "/driver"); link.ok()) return basename_of(*link);
  return std::nullopt;
}

// "400 Gb/sec (4X NDR)" -> 50e9 bytes/s.
std::optional<uint64_t> rdma_rate(std::string_view text) {
  const auto words = split(trim(text), ' ');
  if (words.size() < 2 || words[1] != "Gb/sec") return std::nullopt;
  // The number may have a fraction ("2.5 Gb/sec" on SDR x1): tenths are enough.
  const auto parts = split(words[0], '.');
  auto whole = parse_u64(parts[0]);
  if (!whole) return std::nullopt;
  uint64_t tenths = *whole * 10;
  if (parts.size() > 1 && !parts[1].empty()) tenths += parse_u64(parts[1].substr(0, 1)).value_or(0);
  return tenths * 100'000'000ull / 8;
}

}  // namespace

std::optional<std::string> pci_bus_id_in_path(std::string_view sysfs_path) {
  std::optional<std::string> last;
  for (std::string_view part : split(sysfs_path, '/')) {
    if (auto id = normalize_pci_bus_id(part)) last = id;
  }
  return last;
}

std::optional<BlockDevice> read_block_device(const Machine& m, const std::string& name,
                                             std::vector<std::string>& warnings) {
  const std::string dir = "/sys/block/" + name;
  if (!m.exists(dir)) return std::nullopt;
  BlockDevice b;
  b.name = name;
  if (auto sectors = read_u64(m, dir + "/size", warnings))
    b.size_bytes = *sectors * 512;  // always 512-byte units
  if (auto rot = read_u64(m, dir + "/queue/rotational", warnings)) b.rotational = *rot != 0;
  b.removable = read_u64(m, dir + "/removable", warnings).value_or(0) != 0;
  b.nvme = starts_with(name, "nvme");
  if (auto model = quiet_read(m, dir + "/device/model"); model && !model->empty()) b.model = *model;
  if (auto link = m.read_link(dir); link.ok()) b.pci_bus_id = pci_bus_id_in_path(*link);
  if (!b.pci_bus_id && b.nvme) b.pci_bus_id = pci_slot_of(m, dir + "/device/device");
  if (b.nvme && b.pci_bus_id) {
    Device link;
    link.pci_bus_id = b.pci_bus_id;
    fill_from_pci_sysfs(m, link, warnings);
    if (link.pcie_generation && link.pcie_width)
      b.link_bytes_per_s = pcie_bandwidth_bytes_per_s(*link.pcie_generation, *link.pcie_width);
  }
  return b;
}

std::vector<BlockDevice> probe_storage(const Machine& m, std::vector<std::string>& warnings) {
  std::vector<BlockDevice> out;
  for (const std::string& name : list(m, "/sys/block", warnings)) {
    if (skipped_block_device(name)) continue;
    if (auto b = read_block_device(m, name, warnings)) out.push_back(std::move(*b));
  }
  return out;
}

void probe_network(const Machine& m, SystemIo& io, std::vector<std::string>& warnings) {
  for (const std::string& dev : list(m, "/sys/class/infiniband", warnings)) {
    const std::string dir = "/sys/class/infiniband/" + dev;
    RdmaDevice r;
    r.name = dev;
    r.pci_bus_id = pci_slot_of(m, dir + "/device");
    if (!r.pci_bus_id) {
      if (auto link = m.read_link(dir); link.ok()) r.pci_bus_id = pci_bus_id_in_path(*link);
    }
    // The best port: active before inactive, then the fastest.
    bool best_active = false;
    for (const std::string& port : list(m, dir + "/ports", warnings)) {
      ++r.ports;
      const std::string pdir = dir + "/ports/" + port;
      std::optional<std::string> state;
      if (auto s = quiet_read(m, pdir + "/state")) {  // "4: ACTIVE"
        const size_t colon = s->find(':');
        state = std::string(trim(colon == std::string::npos ? *s : s->substr(colon + 1)));
      }
      std::optional<uint64_t> rate;
      if (auto t = quiet_read(m, pdir + "/rate")) rate = rdma_rate(*t);
      const bool active = state == "ACTIVE";
      const bool better = r.ports == 1 || (active && !best_active) ||
                          (active == best_active && rate.value_or(0) > r.rate_bytes_per_s.value_or(0));
      if (!better) continue;
      best_active = active;
      r.state = state;
      r.rate_bytes_per_s = rate;
      r.link_layer = quiet_read(m, pdir + "/link_layer");
    }
    io.rdma.push_back(std::move(r));
  }
  for (const std::string& name : list(m, "/sys/class/net", warnings)) {
    const std::string dir = "/sys/class/net/" + name;
    if (name == "lo" || !m.exists(dir + "/device")) continue;  // virtual: bridges, veth, tunnels
    NetInterface n;
    n.name = name;
    if (auto speed = quiet_read(m, dir + "/speed")) {
      auto v = parse_i64(*speed);  // Mb/s; -1 or absent while the link is down
      if (v && *v > 0) n.speed_bytes_per_s = static_cast<uint64_t>(*v) * 125'000;
    }
    n.operstate = quiet_read(m, dir + "/operstate");
    n.driver = driver_of(m, dir + "/device");
    n.pci_bus_id = pci_slot_of(m, dir + "/device");
    if (!n.pci_bus_id) {
      if (auto link = m.read_link(dir + "/device"); link.ok()) n.pci_bus_id = pci_bus_id_in_path(*link);
    }
    for (const RdmaDevice& r : io.rdma) {
      if (n.pci_bus_id && r.pci_bus_id == n.pci_bus_id) n.rdma_devices.push_back(r.name);
    }
    io.network.push_back(std::move(n));
  }
}

HostMemoryBandwidth probe_host_memory(const Machine& m, const CpuInfo& cpu,
                                      std::vector<std::string>& warnings) {
  // SMBIOS tables are root-only on most systems: an unreadable one is normal, not a warning.
  std::vector<Dimm> dimms;
  for (const std::string& e : list(m, "/sys/firmware/dmi/entries", warnings)) {
    if (!starts_with(e, "17-")) continue;
    auto raw = m.read_file("/sys/firmware/dmi/entries/" + e + "/raw");
    if (!raw.ok()) continue;
    if (auto d = parse_smbios_memory_device(*raw)) dimms.push_back(*d);
  }
  HostMemoryBandwidth h = host_memory_from_dimms(dimms);
  if (!h.bytes_per_s) h = host_memory_from_platform(cpu);
  return h;
}

}  // namespace gantry::hw::internal
