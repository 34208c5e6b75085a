// NVIDIA GPUs: NVML in-process when libnvidia-ml.so.1 loads; otherwise the kernel driver's procfs
// and PCI sysfs (memory then stays unknown).
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>

#include "nvml_api.h"
#include "probes.h"

namespace gantry::hw::internal {
namespace {

constexpr uint32_t kNvidiaVendor = 0x10de;

std::string cuda_version_text(int v) {  // 12040 -> "12.4"
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

// nvmlNvlinkVersion_t -> "4.0" (1 = 1.0, 2 = 2.0, 3 = 2.2, 4 = 3.0, 5 = 3.1, 6 = 4.0, 7 = 5.0, 8 = 6.0).
std::optional<std::string> nvlink_version_text(unsigned int v) {
  static constexpr const char* kNames[] = {nullptr, "1.0", "2.0", "2.2", "3.0", "3.1", "4.0", "5.0", "6.0"};
  if (v == 0 || v >= std::size(kNames)) return std::nullopt;
  return std::string(kNames[v]);
}

// Every NVLink of `h` (none when the symbols are absent or the GPU has no NVLink).
std::vector<NvLink> read_nvlinks(const nvml::Api& api, nvml::DeviceHandle h) {
  std::vector<NvLink> links;
  if (!api.device_get_nvlink_state) return links;
  for (unsigned int i = 0; i < nvml::kNvLinkMaxLinks; ++i) {
    unsigned int active = 0;
    if (api.device_get_nvlink_state(h, i, &active) != nvml::kSuccess) break;  // past the last link
    NvLink l;
    l.index = static_cast<int>(i);
    l.active = active == 1;
    unsigned int v = 0;
    if (api.device_get_nvlink_version && api.device_get_nvlink_version(h, i, &v) == nvml::kSuccess)
      l.version = nvlink_version_text(v);
    nvml::PciInfo pci{};
    if (l.active && api.device_get_nvlink_remote_pci_info &&
        api.device_get_nvlink_remote_pci_info(h, i, &pci) == nvml::kSuccess)
      l.peer_pci_bus_id = normalize_pci_bus_id(pci.bus_id);
    int type = -1;
    if (l.active && api.device_get_nvlink_remote_device_type &&
        api.device_get_nvlink_remote_device_type(h, i, &type) == nvml::kSuccess) {
      if (type == nvml::kNvLinkDeviceGpu) l.peer_type = "gpu";
      if (type == nvml::kNvLinkDeviceIbmNpu) l.peer_type = "ibmnpu";
      if (type == nvml::kNvLinkDeviceSwitch) l.peer_type = "switch";
    }
    links.push_back(std::move(l));
  }
  return links;
}

// Loads NVML and fills `api`. Unavailable when the library or a required symbol is missing.
Status load_nvml(const LibraryLoader& loader, std::unique_ptr<DynamicLibrary>& lib, nvml::Api& api) {
  auto opened = loader.open("libnvidia-ml.so.1");
  if (!opened.ok()) return opened.status();
  lib = std::move(opened).value();
  constexpr size_t kCount = std::size(nvml::kSymbols);
  static_assert(sizeof(nvml::Api) == kCount * sizeof(void*));
  void* table[kCount];
  for (size_t i = 0; i < kCount; ++i) {
    table[i] = lib->symbol(nvml::kSymbols[i]);
    if (table[i] == nullptr && static_cast<int>(i) < nvml::kRequiredSymbols) {
      return Unavailable(std::string("libnvidia-ml.so.1 lacks ") + nvml::kSymbols[i] + " (driver too old?)");
    }
  }
  std::memcpy(&api, table, sizeof api);
  return Status::Ok();
}

Status probe_nvml(const Machine& m, const LibraryLoader& loader, ProbeOutput& out) {
  std::unique_ptr<DynamicLibrary> lib;
  nvml::Api api{};
  GANTRY_RETURN_IF_ERROR(load_nvml(loader, lib, api));
  auto err = [&](nvml::Return r) { return std::string(api.error_string ? api.error_string(r) : "error"); };
  if (nvml::Return r = api.init(); r != nvml::kSuccess) return Unavailable("nvmlInit failed: " + err(r));
  std::optional<std::string> driver, cuda;
  char buf[96] = {};
  if (api.system_get_driver_version(buf, sizeof buf) == nvml::kSuccess) driver = std::string(buf);
  int cuda_v = 0;
  if (api.system_get_cuda_driver_version(&cuda_v) == nvml::kSuccess && cuda_v > 0)
    cuda = cuda_version_text(cuda_v);
  unsigned int count = 0;
  if (nvml::Return r = api.device_get_count(&count); r != nvml::kSuccess) {
    api.shutdown();
    return Unavailable("nvmlDeviceGetCount failed: " + err(r));
  }
  for (unsigned int i = 0; i < count; ++i) {
    nvml::DeviceHandle h = nullptr;
    if (nvml::Return r = api.device_get_handle_by_index(i, &h); r != nvml::kSuccess) {
      out.warnings.push_back("NVML device " + std::to_string(i) + ": " + err(r));
      continue;
    }
    Device d;
    d.kind = DeviceKind::kGpu;
    d.family = std::string(kFamilyCuda);
    d.vendor = "nvidia";
    d.sources = {"nvml"};
    d.driver_version = driver;
    d.cuda_driver_version = cuda;
    std::memset(buf, 0, sizeof buf);
    d.name = api.device_get_name(h, buf, sizeof buf) == nvml::kSuccess ? buf : "NVIDIA GPU";
    std::memset(buf, 0, sizeof buf);
    if (api.device_get_uuid(h, buf, sizeof buf) == nvml::kSuccess) d.uuid = std::string(buf);
    nvml::PciInfo pci{};
    if (api.device_get_pci_info(h, &pci) == nvml::kSuccess) {
      d.pci_bus_id = normalize_pci_bus_id(pci.bus_id);
      d.pci_vendor_id = pci.pci_device_id & 0xffff;
      d.pci_device_id = pci.pci_device_id >> 16;
    }
    nvml::Memory mem{};
    if (api.device_get_memory_info(h, &mem) == nvml::kSuccess) {
      d.memory_total_bytes = mem.total;
      d.memory_free_bytes = mem.free;
      d.memory_used_bytes = mem.used;
    } else {
      out.warnings.push_back("NVML: memory of " + d.name + " unknown");
    }
    int major = 0, minor = 0;
    if (api.device_get_cuda_compute_capability(h, &major, &minor) == nvml::kSuccess) {
      d.compute_capability = std::to_string(major) + "." + std::to_string(minor);
      d.arch = "sm_" + std::to_string(major * 10 + minor);
    }
    unsigned int u = 0, pending = 0;
    if (api.device_get_curr_pcie_link_generation &&
        api.device_get_curr_pcie_link_generation(h, &u) == nvml::kSuccess)
      d.pcie_generation = static_cast<int>(u);
    if (api.device_get_curr_pcie_link_width && api.device_get_curr_pcie_link_width(h, &u) == nvml::kSuccess)
      d.pcie_width = static_cast<int>(u);
    if (api.device_get_mig_mode && api.device_get_mig_mode(h, &u, &pending) == nvml::kSuccess)
      d.mig_enabled = u == 1;
    if (api.device_get_power_usage && api.device_get_power_usage(h, &u) == nvml::kSuccess)
      d.power_watts = u / 1000.0;
    if (api.device_get_temperature &&
        api.device_get_temperature(h, nvml::kTemperatureGpu, &u) == nvml::kSuccess)
      d.temperature_c = static_cast<int>(u);
    nvml::Utilization util{};
    if (api.device_get_utilization_rates && api.device_get_utilization_rates(h, &util) == nvml::kSuccess)
      d.utilization_percent = static_cast<int>(util.gpu);
    d.nvlinks = read_nvlinks(api, h);
    fill_from_pci_sysfs(m, d, out.warnings);
    out.devices.push_back(std::move(d));
  }
  api.shutdown();
  return Status::Ok();
}

std::optional<std::string> procfs_driver_version(const Machine& m, std::vector<std::string>& warnings) {
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023"
  auto text = read_text(m, "/proc/driver/nvidia/version", warnings);
  if (!text) return std::nullopt;
  const size_t pos = text->find("Kernel Module");
  if (pos == std::string::npos) return std::nullopt;
  for (std::string_view tok : split(std::string_view(*text).substr(pos), ' ')) {
    tok = trim(tok);
    if (!tok.empty() && std::isdigit(static_cast<unsigned char>(tok[0])) &&
        tok.find('.') != std::string_view::npos)
      return std::string(tok);
  }
  return std::nullopt;
}

std::string nvidia_name_for_pci_id(uint32_t device) {
  switch (device) {
    case 0x2330:
      return "NVIDIA H100 80GB HBM3";
    case 0x2331:
      return "NVIDIA H100 PCIe";
    case 0x2335:
      return "NVIDIA H200";
    case 0x20b0:
      return "NVIDIA A100-SXM4-40GB";
    case 0x20b2:
      return "NVIDIA A100-SXM4-80GB";
    case 0x20b5:
      return "NVIDIA A100 80GB PCIe";
    case 0x1db4:
      return "Tesla V100-PCIE-16GB";
    case 0x1eb8:
      return "Tesla T4";
    case 0x27b8:
      return "NVIDIA L4";
    case 0x26b9:
      return "NVIDIA L40S";
    case 0x2236:
      return "NVIDIA A10";
    default: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "NVIDIA GPU 0x%04x", device);
      return buf;
    }
  }
}

// Why an NVIDIA GPU on the PCI bus that the driver did not list cannot be used here; nullopt when it can
// (bound to the NVIDIA driver while /proc/driver/nvidia is hidden from this process: CUDA still reaches
// it). `from_nvml`: NVML listed the GPUs this process may use, so one bound to nvidia that it left out was
// not given to this process.
std::optional<std::string> why_unusable(const Machine& m, const std::string& bus_id, bool from_nvml) {
  std::string driver;
  if (auto link = m.read_link("/sys/bus/pci/devices/" + bus_id + "/driver"); link.ok())
    driver = link->substr(link->rfind('/') + 1);  // "../../../bus/pci/drivers/vfio-pci" -> "vfio-pci"
  if (driver == "nvidia")
    return from_nvml ? std::optional<std::string>(
                           "NVML does not list it: the NVIDIA driver holds it, but this process was not "
                           "given it (a container's or cgroup's device list)")
                     : std::nullopt;
  if (driver.empty())
    return "no driver is bound to it (the NVIDIA kernel driver is not loaded, or does not claim it)";
  if (driver == "vfio-pci")
    return std::string(
        "bound to vfio-pci (reserved for passing through to a virtual machine), not to the "
        "NVIDIA driver");
  if (driver == "nouveau")
    return std::string("bound to nouveau, the open display driver, which CUDA cannot use");
  return "bound to " + driver + ", not to the NVIDIA driver";
}

// The NVIDIA GPUs on the bus that the driver (NVML or procfs) did not list: usable (sysfs facts only)
// when why_unusable says so, else kept in out.unavailable with the reason.
void add_unlisted_gpus(const Machine& m, const std::vector<PciDevice>& pci,
                       const std::optional<std::string>& driver, bool from_nvml, ProbeOutput& out) {
  for (const PciDevice& p : pci) {
    if (p.vendor != kNvidiaVendor || (p.class_code >> 16) != 0x03) continue;
    const bool known = std::any_of(out.devices.begin(), out.devices.end(),
                                   [&](const Device& d) { return d.pci_bus_id == p.bus_id; });
    if (known) continue;
    Device d;
    d.kind = DeviceKind::kGpu;
    d.family = std::string(kFamilyCuda);
    d.vendor = "nvidia";
    d.sources = {"sysfs"};
    d.pci_bus_id = p.bus_id;
    d.name = nvidia_name_for_pci_id(p.device);
    d.compute_capability = nvidia_compute_capability_for_name(d.name);
    d.driver_version = driver;
    fill_from_pci_sysfs(m, d, out.warnings);
    if (auto why = why_unusable(m, p.bus_id, from_nvml)) {
      d.available = false;
      d.unavailable_reason = std::move(why);
      d.driver_version.reset();
      out.unavailable.push_back(std::move(d));
    } else {
      out.devices.push_back(std::move(d));
    }
  }
}

void probe_nvidia_fallback(const Machine& m, const std::vector<PciDevice>& pci, ProbeOutput& out) {
  const auto driver = procfs_driver_version(m, out.warnings);
  for (const std::string& entry : list(m, "/proc/driver/nvidia/gpus", out.warnings)) {
    auto info_text = m.read_file("/proc/driver/nvidia/gpus/" + entry + "/information");
    if (!info_text.ok()) {
      const bool vanished = info_text.status().code() == StatusCode::kNotFound;
      out.warnings.push_back(vanished ? "NVIDIA GPU " + entry + " disappeared while probing"
                                      : info_text.status().message());
      continue;
    }
    auto info = parse_key_values(*info_text, ':');
    Device d;
    d.kind = DeviceKind::kGpu;
    d.family = std::string(kFamilyCuda);
    d.vendor = "nvidia";
    d.sources = {"procfs"};
    d.name = info.count("Model") ? info["Model"] : "NVIDIA GPU";
    // Unprivileged readers see the UUID masked with '?'.
    if (info.count("GPU UUID") && info["GPU UUID"].find('?') == std::string::npos) d.uuid = info["GPU UUID"];
    // "Bus Location: 0000:1b:00.0" (parse_key_values split at the first ':' of the line).
    const size_t loc = info_text->find("Bus Location:");
    if (loc != std::string::npos) {
      const size_t eol = info_text->find('\n', loc);
      d.pci_bus_id = normalize_pci_bus_id(
          std::string_view(*info_text)
              .substr(loc + 13, eol == std::string::npos ? std::string::npos : eol - loc - 13));
    }
    if (!d.pci_bus_id) d.pci_bus_id = normalize_pci_bus_id(entry);
    d.driver_version = driver;
    d.compute_capability = nvidia_compute_capability_for_name(d.name);
    fill_from_pci_sysfs(m, d, out.warnings);
    out.devices.push_back(std::move(d));
  }
  add_unlisted_gpus(m, pci, driver, /*from_nvml=*/false, out);
  for (Device& d : out.devices) {
    if (d.compute_capability) {
      auto v = split(*d.compute_capability, '.');
      d.arch = "sm_" + std::string(v[0]) + std::string(v.size() > 1 ? v[1] : "0");
    }
  }
  std::sort(out.devices.begin(), out.devices.end(),
            [](const Device& a, const Device& b) { return a.pci_bus_id < b.pci_bus_id; });
}

}  // namespace

std::optional<std::string> nvidia_compute_capability_for_name(std::string_view name) {
  // Ordered: more specific names first.
  static constexpr std::pair<std::string_view, std::string_view> kTable[] = {
      {"GB200", "10.0"}, {"B200", "10.0"}, {"B100", "10.0"}, {"GH200", "9.0"}, {"H200", "9.0"},
      {"H100", "9.0"},   {"H800", "9.0"},  {"L40", "8.9"},   {"L4", "8.9"},    {"RTX 40", "8.9"},
      {"A100", "8.0"},   {"A800", "8.0"},  {"A30", "8.0"},   {"A10", "8.6"},   {"A40", "8.6"},
      {"RTX 30", "8.6"}, {"T4", "7.5"},    {"V100", "7.0"},
  };
  for (const auto& [key, cc] : kTable) {
    if (name.find(key) != std::string_view::npos) return std::string(cc);
  }
  return std::nullopt;
}

ProbeOutput probe_nvidia(const Machine& m, const LibraryLoader& loader, const std::vector<PciDevice>& pci) {
  ProbeOutput out;
  Status nvml = probe_nvml(m, loader, out);
  if (nvml.ok()) {
    add_unlisted_gpus(m, pci, std::nullopt, /*from_nvml=*/true, out);
    return out;
  }
  const bool have_nvidia_hw =
      m.exists("/proc/driver/nvidia/gpus") ||
      std::any_of(pci.begin(), pci.end(), [](const PciDevice& p) { return p.vendor == kNvidiaVendor; });
  out.devices.clear();
  out.unavailable.clear();
  probe_nvidia_fallback(m, pci, out);
  if (have_nvidia_hw) {
    out.warnings.push_back("NVML unavailable (" + nvml.message() + "); NVIDIA GPU memory is unknown");
  }
  return out;
}

}  // namespace gantry::hw::internal
