// The peer matrix (how each pair of accelerators reaches the other) and the per-device bandwidth figures.
#include <algorithm>
#include <cstdio>
#include <map>

#include "gantry/hw/bandwidth.h"
#include "probes.h"

namespace gantry::hw::internal {
namespace {

// Bytes/s per direction of one NVLink, by GPU generation (compute capability major): NVLink 1 (Pascal)
// 20 GB/s; NVLink 2-4 (Volta, Ampere, Hopper) 25 GB/s; NVLink 5 (Blackwell) 50 GB/s. Taken from the
// architecture rather than nvmlDeviceGetNvLinkVersion, which some drivers misreport on Hopper.
std::optional<uint64_t> nvlink_lane_bytes(const Device& d) {
  if (!d.compute_capability) return std::nullopt;
  const auto major = parse_u64(split(*d.compute_capability, '.')[0]);
  if (!major) return std::nullopt;
  if (*major == 6) return 20'000'000'000ull;
  if (*major >= 7 && *major <= 9) return 25'000'000'000ull;
  if (*major >= 10) return 50'000'000'000ull;
  return std::nullopt;
}

bool is_gpu_bus(const std::vector<Device>& devices, const std::string& bus) {
  return std::any_of(devices.begin(), devices.end(), [&](const Device& d) { return d.pci_bus_id == bus; });
}

int active_links_to(const Device& a, const std::string& peer_bus) {
  int n = 0;
  for (const NvLink& l : a.nvlinks) n += l.active && l.peer_pci_bus_id == peer_bus;
  return n;
}

// Active links that end at an NVSwitch (or at something that is not a GPU of this machine).
int switch_links(const Device& a, const std::vector<Device>& devices) {
  int n = 0;
  for (const NvLink& l : a.nvlinks) {
    if (!l.active) continue;
    if (l.peer_type == "switch" ||
        (!l.peer_type && l.peer_pci_bus_id && !is_gpu_bus(devices, *l.peer_pci_bus_id)))
      ++n;
  }
  return n;
}

// The sysfs path of a PCI function, split: {"pci0000:00", "0000:00:01.0", "0000:01:00.0", ...}.
std::vector<std::string> pci_path(const Machine& m, const std::string& bus) {
  std::vector<std::string> out;
  auto link = m.read_link("/sys/bus/pci/devices/" + bus);
  if (!link.ok()) return out;
  bool started = false;
  for (std::string_view part : split(*link, '/')) {
    if (starts_with(part, "pci") && part.size() > 3) started = true;
    if (started && !part.empty()) out.emplace_back(part);
  }
  return out;
}

// KFD's xGMI links: nodes/N/{io_links,p2p_links}/M/properties with "type 11" (XGMI), node_from, node_to and
// max_bandwidth (MB/s), keyed by the PCI addresses of both ends. Empty when the kernel does not list them.
using XgmiBandwidth = std::map<std::pair<std::string, std::string>, uint64_t>;
XgmiBandwidth kfd_xgmi_bandwidth(const Machine& m) {
  XgmiBandwidth out;
  std::vector<std::string> ignored;
  const std::string base = "/sys/class/kfd/kfd/topology/nodes";
  std::map<std::string, std::string> bus_of_node;
  std::vector<std::map<std::string, std::string>> links;
  for (const std::string& node : list(m, base, ignored)) {
    if (auto text = read_text(m, base + "/" + node + "/properties", ignored)) {
      auto props = parse_key_values(*text, ' ');
      auto location = parse_u64(props["location_id"]);
      if (location && *location != 0) {
        char bus[32];
        std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.%x",
                      static_cast<unsigned>(parse_u64(props["domain"]).value_or(0)),
                      static_cast<unsigned>((*location >> 8) & 0xff),
                      static_cast<unsigned>((*location >> 3) & 0x1f), static_cast<unsigned>(*location & 0x7));
        bus_of_node[node] = bus;
      }
    }
    for (const char* kind : {"io_links", "p2p_links"}) {
      const std::string dir = base + "/" + node + "/" + kind;
      for (const std::string& l : list(m, dir, ignored)) {
        if (auto text = read_text(m, dir + "/" + l + "/properties", ignored))
          links.push_back(parse_key_values(*text, ' '));
      }
    }
  }
  for (auto& l : links) {
    if (l["type"] != "11") continue;
    auto bw = parse_u64(l["max_bandwidth"]);
    auto from = bus_of_node.find(l["node_from"]), to = bus_of_node.find(l["node_to"]);
    if (!bw || *bw == 0 || from == bus_of_node.end() || to == bus_of_node.end()) continue;
    out[{from->second, to->second}] = *bw * 1'000'000;
  }
  return out;
}

std::optional<PeerLink> nvlink_peer(const Device& a, const Device& b, const std::vector<Device>& devices) {
  if (a.nvlinks.empty() || b.nvlinks.empty() || !a.pci_bus_id || !b.pci_bus_id) return std::nullopt;
  int links = std::max(active_links_to(a, *b.pci_bus_id), active_links_to(b, *a.pci_bus_id));
  if (links == 0) links = std::min(switch_links(a, devices), switch_links(b, devices));
  if (links == 0) return std::nullopt;
  PeerLink p;
  p.type = "nvlink";
  p.links = links;
  if (auto lane = nvlink_lane_bytes(a)) p.bandwidth_bytes_per_s = *lane * static_cast<uint64_t>(links);
  return p;
}

PeerLink pcie_peer(const Machine& m, const Device& a, const Device& b,
                   std::map<std::string, std::vector<std::string>>& paths) {
  PeerLink p;
  auto path_of = [&](const Device& d) -> const std::vector<std::string>& {
    static const std::vector<std::string> kNone;
    if (!d.pci_bus_id) return kNone;
    auto it = paths.find(*d.pci_bus_id);
    if (it == paths.end()) it = paths.emplace(*d.pci_bus_id, pci_path(m, *d.pci_bus_id)).first;
    return it->second;
  };
  const auto& pa = path_of(a);
  const auto& pb = path_of(b);
  const bool numa_differs = a.numa_node && b.numa_node && *a.numa_node != *b.numa_node;
  if (numa_differs) {
    p.type = "cross-numa";
  } else if (pa.size() >= 2 && pb.size() >= 2) {
    size_t common = 0;
    while (common < pa.size() - 1 && common < pb.size() - 1 && pa[common] == pb[common]) ++common;
    // Anything shared below the root complex is a bridge: a PCIe switch (two devices never share a root port
    // without one).
    p.type = common >= 2 ? "pcie-switch" : "pcie-host";
  } else {  // the bridges between them are not readable (a captured tree without links): not guessed
    p.type = "pcie";
  }
  if (a.pcie_bandwidth_bytes_per_s && b.pcie_bandwidth_bytes_per_s)
    p.bandwidth_bytes_per_s = std::min(*a.pcie_bandwidth_bytes_per_s, *b.pcie_bandwidth_bytes_per_s);
  return p;
}

}  // namespace

void annotate_bandwidth(std::vector<Device>& devices, const HostMemoryBandwidth& host) {
  for (Device& d : devices) {
    if (d.pcie_generation && d.pcie_width)
      d.pcie_bandwidth_bytes_per_s = pcie_bandwidth_bytes_per_s(*d.pcie_generation, *d.pcie_width);
    if (d.kind == DeviceKind::kCpu) {
      if (host.bytes_per_s) {
        d.memory_bandwidth_bytes_per_s = host.bytes_per_s;
        d.memory_bandwidth_source = host.source;
      }
      continue;
    }
    // Integrated GPUs and NPUs share host memory: a table entry names discrete parts only.
    if (const KnownDevice* k = find_known_device(d.pci_vendor_id, d.pci_device_id, d.name)) {
      d.memory_bandwidth_bytes_per_s = k->memory_bandwidth_bytes_per_s;
      d.memory_bandwidth_source = "catalogue";
    }
  }
}

std::vector<PeerLink> compute_peers(const Machine& m, const std::vector<Device>& devices) {
  std::vector<PeerLink> out;
  std::map<std::string, std::vector<std::string>> paths;
  std::optional<XgmiBandwidth> xgmi;  // read once, when a pair shares a hive
  for (size_t i = 0; i < devices.size(); ++i) {
    const Device& a = devices[i];
    if (a.kind == DeviceKind::kCpu) continue;
    for (size_t j = i + 1; j < devices.size(); ++j) {
      const Device& b = devices[j];
      if (b.family != a.family) continue;  // peer-to-peer runs within one vendor's stack
      std::optional<PeerLink> p = nvlink_peer(a, b, devices);
      if (!p && a.xgmi_hive_id && a.xgmi_hive_id == b.xgmi_hive_id) {
        p = PeerLink{};
        p->type = "xgmi";
        if (!xgmi) xgmi = kfd_xgmi_bandwidth(m);
        if (a.pci_bus_id && b.pci_bus_id) {
          auto it = xgmi->find({*a.pci_bus_id, *b.pci_bus_id});
          if (it == xgmi->end()) it = xgmi->find({*b.pci_bus_id, *a.pci_bus_id});
          if (it != xgmi->end()) p->bandwidth_bytes_per_s = it->second;
        }
      }
      if (!p) {
        if (!a.pci_bus_id || !b.pci_bus_id) continue;  // no PCI function: nothing to say
        p = pcie_peer(m, a, b, paths);
      }
      p->a = a.id;
      p->b = b.id;
      out.push_back(std::move(*p));
    }
  }
  return out;
}

}  // namespace gantry::hw::internal
