// Vulkan physical devices through the loader (libvulkan.so.1): every GPU a Vulkan driver exposes,
// including ones no vendor-specific probe knows. CPU implementations (llvmpipe) are skipped.
#include <cstdio>
#include <cstring>
#include <vector>

#include "probes.h"
#include "vulkan_api.h"

namespace gantry::hw::internal {
namespace {

std::string vendor_name(uint32_t id) {
  switch (id) {
    case 0x10de:
      return "nvidia";
    case 0x1002:
      return "amd";
    case 0x8086:
      return "intel";
    case 0x13b5:
      return "arm";
    case 0x5143:
      return "qualcomm";
    case 0x106b:
      return "apple";
    case 0x1010:
      return "imagination";
    default: {
      char buf[16];
      std::snprintf(buf, sizeof buf, "0x%04x", id);
      return buf;
    }
  }
}

std::string driver_version_text(uint32_t vendor, uint32_t v) {
  if (vendor == 0x10de) {  // NVIDIA packs 10.8.8.6 bits
    return std::to_string(v >> 22) + "." + std::to_string((v >> 14) & 0xff) + "." +
           std::to_string((v >> 6) & 0xff);
  }
  return std::to_string(v >> 22) + "." + std::to_string((v >> 12) & 0x3ff) + "." + std::to_string(v & 0xfff);
}

template <typename F>
F lookup(vk::PFN_GetInstanceProcAddr gipa, vk::Instance inst, const char* name) {
  return reinterpret_cast<F>(gipa(inst, name));
}

}  // namespace

ProbeOutput probe_vulkan(const LibraryLoader& loader) {
  ProbeOutput out;
  auto lib = loader.open("libvulkan.so.1");
  if (!lib.ok()) return out;  // no Vulkan loader: nothing to report
  auto gipa = reinterpret_cast<vk::PFN_GetInstanceProcAddr>((*lib)->symbol("vkGetInstanceProcAddr"));
  if (gipa == nullptr) {
    out.warnings.push_back("libvulkan.so.1 lacks vkGetInstanceProcAddr");
    return out;
  }
  auto create = lookup<vk::PFN_CreateInstance>(gipa, nullptr, "vkCreateInstance");
  if (create == nullptr) {
    out.warnings.push_back("Vulkan loader lacks vkCreateInstance");
    return out;
  }
  vk::ApplicationInfo app{
      vk::kStructureTypeApplicationInfo, nullptr, "gantry", 1, "gantry", 1, vk::kApiVersion11};
  vk::InstanceCreateInfo info{vk::kStructureTypeInstanceCreateInfo, nullptr, 0, &app, 0, nullptr, 0, nullptr};
  vk::Instance instance = nullptr;
  if (vk::Result r = create(&info, nullptr, &instance); r != vk::kSuccess) {
    // -9 (VK_ERROR_INCOMPATIBLE_DRIVER) simply means no Vulkan driver is installed.
    if (r != -9) out.warnings.push_back("vkCreateInstance failed with VkResult " + std::to_string(r));
    return out;
  }
  auto destroy = lookup<vk::PFN_DestroyInstance>(gipa, instance, "vkDestroyInstance");
  auto enumerate = lookup<vk::PFN_EnumeratePhysicalDevices>(gipa, instance, "vkEnumeratePhysicalDevices");
  auto props1 = lookup<vk::PFN_GetPhysicalDeviceProperties>(gipa, instance, "vkGetPhysicalDeviceProperties");
  auto props2 =
      lookup<vk::PFN_GetPhysicalDeviceProperties2>(gipa, instance, "vkGetPhysicalDeviceProperties2");
  auto memprops = lookup<vk::PFN_GetPhysicalDeviceMemoryProperties>(gipa, instance,
                                                                    "vkGetPhysicalDeviceMemoryProperties");
  auto extensions = lookup<vk::PFN_EnumerateDeviceExtensionProperties>(
      gipa, instance, "vkEnumerateDeviceExtensionProperties");
  if (enumerate == nullptr || props1 == nullptr || memprops == nullptr) {
    out.warnings.push_back("Vulkan loader lacks core 1.0 entry points");
    if (destroy) destroy(instance, nullptr);
    return out;
  }
  uint32_t count = 0;
  std::vector<vk::PhysicalDevice> devices;
  vk::Result r = enumerate(instance, &count, nullptr);
  if (r == vk::kSuccess && count > 0) {
    devices.resize(count);
    r = enumerate(instance, &count, devices.data());
    devices.resize(r == vk::kSuccess || r == vk::kIncomplete ? count : 0);
  }
  for (vk::PhysicalDevice pd : devices) {
    auto p = std::make_unique<vk::PhysicalDeviceProperties>();
    props1(pd, p.get());
    if (p->device_type == vk::kCpu) continue;
    Device d;
    d.kind = DeviceKind::kGpu;
    d.family = std::string(kFamilyVulkan);
    d.vendor = vendor_name(p->vendor_id);
    d.name = std::string(p->device_name, strnlen(p->device_name, sizeof p->device_name));
    d.pci_vendor_id = p->vendor_id;
    d.pci_device_id = p->device_id;
    d.driver_version = driver_version_text(p->vendor_id, p->driver_version);
    d.sources = {"vulkan"};
    // PCI address through VK_EXT_pci_bus_info when the device advertises it.
    bool has_pci_ext = false;
    if (extensions != nullptr && props2 != nullptr) {
      uint32_t n = 0;
      if (extensions(pd, nullptr, &n, nullptr) == vk::kSuccess && n > 0) {
        std::vector<vk::ExtensionProperties> exts(n);
        if (extensions(pd, nullptr, &n, exts.data()) == vk::kSuccess) {
          for (uint32_t i = 0; i < n; ++i)
            has_pci_ext = has_pci_ext || std::strcmp(exts[i].extension_name, "VK_EXT_pci_bus_info") == 0;
        }
      }
    }
    if (has_pci_ext) {
      vk::PciBusInfoProperties bus{vk::kStructureTypePciBusInfoProperties, nullptr, 0, 0, 0, 0};
      auto p2 = std::make_unique<vk::PhysicalDeviceProperties2>();
      p2->s_type = vk::kStructureTypePhysicalDeviceProperties2;
      p2->next = &bus;
      props2(pd, p2.get());
      char id[32];
      std::snprintf(id, sizeof id, "%04x:%02x:%02x.%x", bus.pci_domain, bus.pci_bus, bus.pci_device,
                    bus.pci_function);
      d.pci_bus_id = normalize_pci_bus_id(id);
    }
    // Discrete GPUs: device-local heaps are VRAM. Integrated ones share host memory (unknown here).
    if (p->device_type == vk::kDiscreteGpu) {
      vk::PhysicalDeviceMemoryProperties mem{};
      memprops(pd, &mem);
      uint64_t total = 0;
      for (uint32_t i = 0; i < mem.memory_heap_count && i < 16; ++i) {
        if (mem.memory_heaps[i].flags & vk::kMemoryHeapDeviceLocal) total += mem.memory_heaps[i].size;
      }
      if (total > 0) d.memory_total_bytes = total;
    }
    out.devices.push_back(std::move(d));
  }
  if (destroy) destroy(instance, nullptr);
  return out;
}

}  // namespace gantry::hw::internal
