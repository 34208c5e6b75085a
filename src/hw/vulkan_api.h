// The part of Vulkan's public C ABI (vulkan_core.h) that Gantry calls, declared here because the
// headers are not installed where Gantry builds. Everything is reached through
// vkGetInstanceProcAddr, the loader's one guaranteed export.
#pragma once

#include <cstdint>

namespace gantry::hw::internal::vk {

using Result = int32_t;  // VkResult; 0 = VK_SUCCESS, 5 = VK_INCOMPLETE
inline constexpr Result kSuccess = 0;
inline constexpr Result kIncomplete = 5;
using Instance = struct VkInstance_T*;
using PhysicalDevice = struct VkPhysicalDevice_T*;
using VoidFunction = void (*)();

inline constexpr int32_t kStructureTypeApplicationInfo = 0;
inline constexpr int32_t kStructureTypeInstanceCreateInfo = 1;
inline constexpr int32_t kStructureTypePhysicalDeviceProperties2 = 1000059001;
inline constexpr int32_t kStructureTypePciBusInfoProperties = 1000212000;
inline constexpr uint32_t kApiVersion11 = (1u << 22) | (1u << 12);
inline constexpr uint32_t kMemoryHeapDeviceLocal = 0x1;

enum PhysicalDeviceType : int32_t {
  kOther = 0,
  kIntegratedGpu = 1,
  kDiscreteGpu = 2,
  kVirtualGpu = 3,
  kCpu = 4
};

struct ApplicationInfo {
  int32_t s_type;
  const void* next;
  const char* application_name;
  uint32_t application_version;
  const char* engine_name;
  uint32_t engine_version;
  uint32_t api_version;
};

struct InstanceCreateInfo {
  int32_t s_type;
  const void* next;
  uint32_t flags;
  const ApplicationInfo* application_info;
  uint32_t enabled_layer_count;
  const char* const* enabled_layer_names;
  uint32_t enabled_extension_count;
  const char* const* enabled_extension_names;
};

// VkPhysicalDeviceProperties: only the leading members are read; `rest` covers VkPhysicalDeviceLimits
// and VkPhysicalDeviceSparseProperties (about 520 bytes) with room to spare.
struct PhysicalDeviceProperties {
  uint32_t api_version;
  uint32_t driver_version;
  uint32_t vendor_id;
  uint32_t device_id;
  int32_t device_type;
  char device_name[256];
  uint8_t pipeline_cache_uuid[16];
  alignas(8) uint8_t rest[1024];
};

struct PhysicalDeviceProperties2 {
  int32_t s_type;
  void* next;
  PhysicalDeviceProperties properties;
};

struct PciBusInfoProperties {
  int32_t s_type;
  void* next;
  uint32_t pci_domain;
  uint32_t pci_bus;
  uint32_t pci_device;
  uint32_t pci_function;
};

struct MemoryType {
  uint32_t property_flags;
  uint32_t heap_index;
};
struct MemoryHeap {
  uint64_t size;
  uint32_t flags;
};
struct PhysicalDeviceMemoryProperties {
  uint32_t memory_type_count;
  MemoryType memory_types[32];
  uint32_t memory_heap_count;
  MemoryHeap memory_heaps[16];
};

struct ExtensionProperties {
  char extension_name[256];
  uint32_t spec_version;
};

using PFN_GetInstanceProcAddr = VoidFunction (*)(Instance, const char*);
using PFN_CreateInstance = Result (*)(const InstanceCreateInfo*, const void* allocator, Instance*);
using PFN_DestroyInstance = void (*)(Instance, const void* allocator);
using PFN_EnumeratePhysicalDevices = Result (*)(Instance, uint32_t*, PhysicalDevice*);
using PFN_GetPhysicalDeviceProperties = void (*)(PhysicalDevice, PhysicalDeviceProperties*);
using PFN_GetPhysicalDeviceProperties2 = void (*)(PhysicalDevice, PhysicalDeviceProperties2*);
using PFN_GetPhysicalDeviceMemoryProperties = void (*)(PhysicalDevice, PhysicalDeviceMemoryProperties*);
using PFN_EnumerateDeviceExtensionProperties = Result (*)(PhysicalDevice, const char*, uint32_t*,
                                                          ExtensionProperties*);

}  // namespace gantry::hw::internal::vk
