// Vulkan through the loader seam: a fake libvulkan whose vkGetInstanceProcAddr hands out test
// functions. Devices it shares with sysfs/procfs are merged, CPU implementations are skipped.
#include <gtest/gtest.h>

#include <cstring>

#include "hw/hw_test_util.h"
#include "hw/vulkan_api.h"

namespace gantry::hw {
namespace {

namespace vk = internal::vk;
using testing::FakeLoader;
using testing::FakeMachine;
using testing::find_id;
using testing::fixture;

struct FakeGpu {
  uint32_t vendor, device;
  int32_t type;
  const char* name;
  bool pci_ext;
  uint32_t bus;
  uint64_t vram;
};
// H100 with VK_EXT_pci_bus_info, llvmpipe (a CPU), a Radeon without the extension, a discrete GPU
// no other probe knows.
const FakeGpu kGpus[] = {
    {0x10de, 0x2330, vk::kDiscreteGpu, "NVIDIA H100 80GB HBM3", true, 0x18, 85899345920ull},
    {0x10005, 0, vk::kCpu, "llvmpipe (LLVM 15.0.6, 256 bits)", false, 0, 0},
    {0x1002, 0x15bf, vk::kIntegratedGpu, "AMD Radeon 780M (RADV GFX1103_R1)", false, 0, 0},
    {0x1ed5, 0x0301, vk::kDiscreteGpu, "MTT S80", false, 0, 17179869184ull},
};
int g_destroyed = 0;
vk::Instance const kInstance = reinterpret_cast<vk::Instance>(0x1);

const FakeGpu& gpu(vk::PhysicalDevice pd) { return kGpus[reinterpret_cast<uintptr_t>(pd) - 1]; }

vk::Result create_instance(const vk::InstanceCreateInfo* info, const void*, vk::Instance* out) {
  if (info->s_type != vk::kStructureTypeInstanceCreateInfo) return -3;
  *out = kInstance;
  return vk::kSuccess;
}
void destroy_instance(vk::Instance, const void*) { ++g_destroyed; }
vk::Result enumerate(vk::Instance, uint32_t* count, vk::PhysicalDevice* out) {
  const uint32_t n = std::size(kGpus);
  if (out == nullptr) return *count = n, vk::kSuccess;
  for (uint32_t i = 0; i < *count && i < n; ++i)
    out[i] = reinterpret_cast<vk::PhysicalDevice>(uintptr_t{i + 1});
  return *count < n ? vk::kIncomplete : vk::kSuccess;
}
void properties(vk::PhysicalDevice pd, vk::PhysicalDeviceProperties* p) {
  std::memset(p, 0, sizeof *p);
  const FakeGpu& g = gpu(pd);
  p->vendor_id = g.vendor;
  p->device_id = g.device;
  p->device_type = g.type;
  p->driver_version =
      g.vendor == 0x10de ? (550u << 22) | (54u << 14) | (15u << 6) : (24u << 22) | (2u << 12) | 8u;
  std::strncpy(p->device_name, g.name, sizeof p->device_name - 1);
}
void properties2(vk::PhysicalDevice pd, vk::PhysicalDeviceProperties2* p) {
  properties(pd, &p->properties);
  for (auto* next = static_cast<vk::PciBusInfoProperties*>(p->next); next;
       next = static_cast<vk::PciBusInfoProperties*>(next->next)) {
    if (next->s_type == vk::kStructureTypePciBusInfoProperties) {
      next->pci_domain = 0, next->pci_bus = gpu(pd).bus, next->pci_device = 0, next->pci_function = 0;
    }
  }
}
void memory(vk::PhysicalDevice pd, vk::PhysicalDeviceMemoryProperties* m) {
  std::memset(m, 0, sizeof *m);
  m->memory_heap_count = 2;
  m->memory_heaps[0] = {gpu(pd).vram, vk::kMemoryHeapDeviceLocal};
  m->memory_heaps[1] = {64ull << 30, 0};  // host-visible system memory: not the device's
}
vk::Result extensions(vk::PhysicalDevice pd, const char*, uint32_t* count, vk::ExtensionProperties* out) {
  const uint32_t n = gpu(pd).pci_ext ? 2 : 1;
  if (out == nullptr) return *count = n, vk::kSuccess;
  std::strcpy(out[0].extension_name, "VK_KHR_swapchain");
  if (n == 2) std::strcpy(out[1].extension_name, "VK_EXT_pci_bus_info");
  return vk::kSuccess;
}

vk::VoidFunction get_proc(vk::Instance, const char* name) {
  const std::map<std::string, vk::VoidFunction> table = {
      {"vkCreateInstance", reinterpret_cast<vk::VoidFunction>(&create_instance)},
      {"vkDestroyInstance", reinterpret_cast<vk::VoidFunction>(&destroy_instance)},
      {"vkEnumeratePhysicalDevices", reinterpret_cast<vk::VoidFunction>(&enumerate)},
      {"vkGetPhysicalDeviceProperties", reinterpret_cast<vk::VoidFunction>(&properties)},
      {"vkGetPhysicalDeviceProperties2", reinterpret_cast<vk::VoidFunction>(&properties2)},
      {"vkGetPhysicalDeviceMemoryProperties", reinterpret_cast<vk::VoidFunction>(&memory)},
      {"vkEnumerateDeviceExtensionProperties", reinterpret_cast<vk::VoidFunction>(&extensions)},
  };
  auto it = table.find(name);
  return it == table.end() ? nullptr : it->second;
}

FakeLoader vulkan_loader() {
  FakeLoader loader;
  loader.add("libvulkan.so.1", {{"vkGetInstanceProcAddr", reinterpret_cast<void*>(&get_proc)}});
  return loader;
}

TEST(Vulkan, MergesWithProcfsByPciAddressAndKeepsUnknownGpus) {
  g_destroyed = 0;
  FakeMachine m(fixture("nvidia-dgx-h100"));
  FakeLoader loader = vulkan_loader();
  Registry r = detect(m, loader);
  EXPECT_EQ(g_destroyed, 1);
  ASSERT_EQ(testing::count_family(r, kFamilyCuda), 8) << "the H100 Vulkan sees is cuda:0, not a ninth GPU";
  const Device* cuda0 = find_id(r, "cuda:0");
  EXPECT_EQ(cuda0->sources, (std::vector<std::string>{"procfs", "vulkan"}));
  EXPECT_EQ(cuda0->driver_version, "535.104.05") << "the first probe's values win";
  EXPECT_EQ(cuda0->memory_total_bytes, 85899345920ull)
      << "procfs had no memory: Vulkan's device-local heap fills it";
  ASSERT_EQ(testing::count_family(r, kFamilyVulkan), 2);  // the Radeon and the MTT S80; llvmpipe skipped
  const Device* mtt = nullptr;
  for (const auto& d : r.devices) {
    if (d.name == "MTT S80") mtt = &d;
    EXPECT_EQ(d.name.find("llvmpipe"), std::string::npos);
  }
  ASSERT_NE(mtt, nullptr);
  EXPECT_EQ(mtt->kind, DeviceKind::kGpu);
  EXPECT_EQ(mtt->memory_total_bytes, 17179869184ull);
  EXPECT_EQ(mtt->vendor, "0x1ed5");
  EXPECT_EQ(mtt->driver_version, "24.2.8");
}

TEST(Vulkan, IntegratedGpuWithoutPciExtensionMergesByIds) {
  FakeMachine m(fixture("amd-xdna-laptop"));
  FakeLoader loader = vulkan_loader();
  Registry r = detect(m, loader);
  const Device* radeon = find_id(r, "rocm:0");
  ASSERT_NE(radeon, nullptr);
  EXPECT_EQ(radeon->sources, (std::vector<std::string>{"sysfs", "kfd", "vulkan"}));
  EXPECT_EQ(radeon->memory_total_bytes, 512ull * 1024 * 1024) << "sysfs VRAM, not a Vulkan guess";
  // NVIDIA (no such GPU here) and the MTT S80 stay Vulkan-only devices.
  EXPECT_EQ(testing::count_family(r, kFamilyVulkan), 2);
  const Device* nv = find_id(r, "vulkan:0");
  ASSERT_NE(nv, nullptr);
  EXPECT_EQ(nv->pci_bus_id, "0000:18:00.0");
  EXPECT_EQ(nv->driver_version, "550.54.15");
  EXPECT_EQ(nv->memory_total_bytes, 85899345920ull);
}

TEST(Vulkan, DisabledByOption) {
  FakeMachine m(fixture("amd-xdna-laptop"));
  FakeLoader loader = vulkan_loader();
  DetectOptions options;
  options.use_vulkan = false;
  Registry r = detect(m, loader, options);
  EXPECT_EQ(testing::count_family(r, kFamilyVulkan), 0);
  EXPECT_FALSE(r.timings_ms.count("vulkan"));
}

}  // namespace
}  // namespace gantry::hw
