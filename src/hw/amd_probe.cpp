// AMD GPUs (amdgpu): VRAM and product name from PCI sysfs, gfx target and compute units from the
// KFD topology (/sys/class/kfd/kfd/topology/nodes/*/properties).
#include <algorithm>
#include <cstdio>

#include "probes.h"

namespace gantry::hw::internal {
namespace {

constexpr uint32_t kAmdVendor = 0x1002;

struct KfdNode {
  std::string gfx;  // "gfx942"
  std::optional<int> compute_units;
  std::optional<std::string> uuid;
  std::optional<uint64_t> hive_id;  // xGMI hive; 0 (absent) when the GPU is in none
};

std::string hive_text(uint64_t id) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(id));
  return buf;
}

// gfx_target_version 90402 -> "gfx942", 90010 -> "gfx90a", 110000 -> "gfx1100".
std::string gfx_name(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "gfx%u%u%x", static_cast<unsigned>(v / 10000),
                static_cast<unsigned>((v / 100) % 100), static_cast<unsigned>(v % 100));
  return buf;
}

std::map<std::string, KfdNode> read_kfd(const Machine& m, std::vector<std::string>& warnings) {
  std::map<std::string, KfdNode> by_bus;
  const std::string base = "/sys/class/kfd/kfd/topology/nodes";
  for (const std::string& node : list(m, base, warnings)) {
    auto text = read_text(m, base + "/" + node + "/properties", warnings);
    if (!text) continue;
    auto props = parse_key_values(*text, ' ');
    auto gfx = parse_u64(props["gfx_target_version"]);
    auto simd = parse_u64(props["simd_count"]);
    if (!gfx || *gfx == 0 || !simd || *simd == 0) continue;  // a CPU node
    auto location = parse_u64(props["location_id"]);
    auto domain = parse_u64(props["domain"]);
    if (!location) continue;
    char bus[32];
    std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.%x", static_cast<unsigned>(domain.value_or(0)),
                  static_cast<unsigned>((*location >> 8) & 0xff),
                  static_cast<unsigned>((*location >> 3) & 0x1f), static_cast<unsigned>(*location & 0x7));
    KfdNode k;
    k.gfx = gfx_name(*gfx);
    auto per_cu = parse_u64(props["simd_per_cu"]);
    if (per_cu && *per_cu > 0) k.compute_units = static_cast<int>(*simd / *per_cu);
    if (auto uid = parse_u64(props["unique_id"]); uid && *uid != 0) {
      char u[32];
      std::snprintf(u, sizeof u, "GPU-%016llx", static_cast<unsigned long long>(*uid));
      k.uuid = u;
    }
    if (auto hive = parse_u64(props["hive_id"]); hive && *hive != 0) k.hive_id = hive;
    by_bus[bus] = k;
  }
  return by_bus;
}

std::string amd_name_for_pci_id(uint32_t device) {
  switch (device) {
    case 0x738c:
      return "AMD Instinct MI100";
    case 0x7408:
      return "AMD Instinct MI250X";
    case 0x740c:
      return "AMD Instinct MI250X/MI250";
    case 0x740f:
      return "AMD Instinct MI210";
    case 0x74a1:
      return "AMD Instinct MI300X";
    case 0x74a5:
      return "AMD Instinct MI325X";
    case 0x74a0:
      return "AMD Instinct MI300A";
    case 0x744c:
      return "AMD Radeon RX 7900 XTX";
    default: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "AMD GPU 0x%04x", device);
      return buf;
    }
  }
}

}  // namespace

ProbeOutput probe_amd(const Machine& m, const std::vector<PciDevice>& pci) {
  ProbeOutput out;
  std::vector<const PciDevice*> gpus;
  for (const PciDevice& p : pci) {
    const uint32_t base_class = p.class_code >> 16;
    if (p.vendor == kAmdVendor && (base_class == 0x03 || base_class == 0x12)) gpus.push_back(&p);
  }
  if (gpus.empty()) return out;
  const auto kfd = read_kfd(m, out.warnings);
  const auto driver = read_text(m, "/sys/module/amdgpu/version", out.warnings);
  for (const PciDevice* p : gpus) {
    const auto& drv = p->driver;
    auto k = kfd.find(p->bus_id);
    if (drv != "amdgpu" && k == kfd.end()) continue;  // e.g. an HDMI audio function or an unbound GPU
    Device d;
    d.kind = DeviceKind::kGpu;
    d.family = std::string(kFamilyRocm);
    d.vendor = "amd";
    d.sources = {"sysfs"};
    d.pci_bus_id = p->bus_id;
    const std::string dir = p->path();
    auto product = read_text(m, dir + "/product_name", out.warnings);
    d.name = product && !product->empty() ? *product : amd_name_for_pci_id(p->device);
    d.memory_total_bytes = read_u64(m, dir + "/mem_info_vram_total", out.warnings);
    d.memory_used_bytes = read_u64(m, dir + "/mem_info_vram_used", out.warnings);
    if (d.memory_total_bytes && d.memory_used_bytes && *d.memory_used_bytes <= *d.memory_total_bytes)
      d.memory_free_bytes = *d.memory_total_bytes - *d.memory_used_bytes;
    if (k != kfd.end()) {
      d.arch = k->second.gfx;
      d.cores = k->second.compute_units;
      d.uuid = k->second.uuid;
      if (k->second.hive_id) d.xgmi_hive_id = hive_text(*k->second.hive_id);
      d.sources.push_back("kfd");
    }
    // amdgpu's own view of the hive (present when the GPU has xGMI links).
    if (!d.xgmi_hive_id) {
      auto hive = read_text(m, dir + "/xgmi_hive_info/xgmi_hive_id", out.warnings);
      if (auto v = hive ? parse_u64(*hive) : std::nullopt; v && *v != 0) d.xgmi_hive_id = hive_text(*v);
    }
    d.driver_version = driver;
    fill_from_pci_sysfs(m, d, out.warnings);
    out.devices.push_back(std::move(d));
  }
  return out;
}

}  // namespace gantry::hw::internal
