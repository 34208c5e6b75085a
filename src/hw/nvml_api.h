// The part of NVML's public C ABI (nvml.h) that Gantry calls, declared here because the header is
// not installed where Gantry builds. Layouts match nvml.h; functions are looked up by name.
#pragma once

#include <memory>

#include "gantry/hw/loader.h"

namespace gantry::hw::internal::nvml {

using Return = int;  // nvmlReturn_t
inline constexpr Return kSuccess = 0;
using DeviceHandle = struct nvmlDevice_st*;

struct PciInfo {  // nvmlPciInfo_t (v3)
  char bus_id_legacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;  // (device << 16) | vendor
  unsigned int pci_subsystem_id;
  char bus_id[32];
};

struct Memory {  // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct Utilization {  // nvmlUtilization_t
  unsigned int gpu;
  unsigned int memory;
};

inline constexpr int kTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU

struct Api {
  Return (*init)();  // nvmlInit_v2
  Return (*shutdown)();
  const char* (*error_string)(Return);
  Return (*system_get_driver_version)(char*, unsigned int);
  Return (*system_get_cuda_driver_version)(int*);                     // nvmlSystemGetCudaDriverVersion_v2
  Return (*device_get_count)(unsigned int*);                          // _v2
  Return (*device_get_handle_by_index)(unsigned int, DeviceHandle*);  // _v2
  Return (*device_get_name)(DeviceHandle, char*, unsigned int);
  Return (*device_get_uuid)(DeviceHandle, char*, unsigned int);
  Return (*device_get_pci_info)(DeviceHandle, PciInfo*);  // _v3
  Return (*device_get_memory_info)(DeviceHandle, Memory*);
  Return (*device_get_cuda_compute_capability)(DeviceHandle, int*, int*);
  // Optional: absent or failing ones leave the field unknown.
  Return (*device_get_curr_pcie_link_generation)(DeviceHandle, unsigned int*);
  Return (*device_get_curr_pcie_link_width)(DeviceHandle, unsigned int*);
  Return (*device_get_mig_mode)(DeviceHandle, unsigned int*, unsigned int*);
  Return (*device_get_power_usage)(DeviceHandle, unsigned int*);  // milliwatts
  Return (*device_get_temperature)(DeviceHandle, int, unsigned int*);
  Return (*device_get_utilization_rates)(DeviceHandle, Utilization*);
  // NVLink (optional; GPUs without NVLink answer NOT_SUPPORTED for link 0).
  Return (*device_get_nvlink_state)(DeviceHandle, unsigned int link, unsigned int* active);
  Return (*device_get_nvlink_version)(DeviceHandle, unsigned int link, unsigned int* version);
  Return (*device_get_nvlink_remote_pci_info)(DeviceHandle, unsigned int link, PciInfo*);  // _v2
  Return (*device_get_nvlink_remote_device_type)(DeviceHandle, unsigned int link, int* type);
};

inline constexpr unsigned int kNvLinkMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS
// nvmlIntNvLinkDeviceType_t
inline constexpr int kNvLinkDeviceGpu = 0, kNvLinkDeviceIbmNpu = 1, kNvLinkDeviceSwitch = 2;

// Symbol names in the order of Api's members.
inline constexpr const char* kSymbols[] = {
    "nvmlInit_v2",
    "nvmlShutdown",
    "nvmlErrorString",
    "nvmlSystemGetDriverVersion",
    "nvmlSystemGetCudaDriverVersion_v2",
    "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetCudaComputeCapability",
    "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetMigMode",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetNvLinkState",
    "nvmlDeviceGetNvLinkVersion",
    "nvmlDeviceGetNvLinkRemotePciInfo_v2",
    "nvmlDeviceGetNvLinkRemoteDeviceType",
};
inline constexpr int kRequiredSymbols = 12;  // the first twelve must exist

}  // namespace gantry::hw::internal::nvml
