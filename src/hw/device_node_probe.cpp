// Accelerators that show themselves only as device nodes (no PCI class, sysfs attributes or management
// library Gantry reads): Graphcore IPUs (/dev/ipuN), Groq LPUs (/dev/groqN), Cerebras (/dev/cerebras*),
// Samsung Exynos NPUs (/sys/class/misc/samsung_npu or /dev/samsung_npu*) and MediaTek APUs
// (/sys/class/misc/mtk_apu or /dev/mtk_mdla*): the sources ai-hwaccel reads. The nodes say that a device
// is there, not how much memory it has: that stays unknown in the registry, and the advice (advice.h)
// names the datasheet figure it assumes.
#include <algorithm>
#include <cctype>

#include "probes.h"

namespace gantry::hw::internal {
namespace {

// "ipu3" for prefix "ipu": the number after the prefix; nullopt for "ipu-psys0" (Intel's camera IPU).
std::optional<int> numbered(std::string_view name, std::string_view prefix) {
  if (!starts_with(name, prefix) || name.size() == prefix.size()) return std::nullopt;
  int n = 0;
  for (const char c : name.substr(prefix.size())) {
    if (!std::isdigit(static_cast<unsigned char>(c)) || n > 100000) return std::nullopt;
    n = n * 10 + (c - '0');
  }
  return n;
}

Device node_device(DeviceKind kind, std::string_view family, std::string vendor, std::string name,
                   std::string source) {
  Device d;
  d.kind = kind;
  d.family = std::string(family);
  d.vendor = std::move(vendor);
  d.name = std::move(name);
  d.sources = {std::move(source)};
  return d;
}

}  // namespace

void probe_device_nodes(const Machine& m, ProbeOutput& out) {
  std::vector<std::string> dev;
  if (m.exists("/dev")) dev = list(m, "/dev", out.warnings);
  std::sort(dev.begin(), dev.end());
  bool samsung = m.exists("/sys/class/misc/samsung_npu");
  bool mediatek = m.exists("/sys/class/misc/mtk_apu");
  bool cerebras = false;
  for (const std::string& n : dev) {
    if (numbered(n, "ipu")) {
      out.devices.push_back(
          node_device(DeviceKind::kAsic, kFamilyGraphcore, "graphcore", "Graphcore IPU", "dev"));
    } else if (numbered(n, "groq")) {
      out.devices.push_back(node_device(DeviceKind::kAsic, kFamilyGroq, "groq", "Groq LPU", "dev"));
    } else if (starts_with(n, "cerebras")) {
      cerebras = true;  // one system however many nodes its driver makes
    } else if (starts_with(n, "samsung_npu")) {
      samsung = true;
    } else if (starts_with(n, "mtk_mdla")) {
      mediatek = true;
    }
  }
  if (cerebras)
    out.devices.push_back(
        node_device(DeviceKind::kAsic, kFamilyCerebras, "cerebras", "Cerebras Wafer-Scale Engine", "dev"));
  if (samsung)
    out.devices.push_back(
        node_device(DeviceKind::kNpu, kFamilySamsungNpu, "samsung", "Samsung Exynos NPU", "sysfs"));
  if (mediatek)
    out.devices.push_back(
        node_device(DeviceKind::kNpu, kFamilyMediatekApu, "mediatek", "MediaTek APU (MDLA)", "sysfs"));
}

}  // namespace gantry::hw::internal
