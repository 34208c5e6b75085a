// The part of the CUDA driver API (cuda.h) the VMM backing calls, declared here so that building needs
// no CUDA headers. Layouts and values match cuda.h (CUDA 11.2 and later); functions are looked up by
// name in libcuda.so.1 at run time.
#pragma once

#include <cstdint>

namespace gantry::memory::internal::cu {

using Result = int;  // CUresult
inline constexpr Result kSuccess = 0;
using Device = int;                    // CUdevice
using Context = struct CUctx_st*;      // CUcontext
using DevicePtr = unsigned long long;  // CUdeviceptr
using Handle = unsigned long long;     // CUmemGenericAllocationHandle

inline constexpr int kAttrVmmSupported = 102;  // CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
inline constexpr int kAllocationPinned = 1;    // CU_MEM_ALLOCATION_TYPE_PINNED
inline constexpr int kLocationDevice = 1;      // CU_MEM_LOCATION_TYPE_DEVICE
inline constexpr int kAccessReadWrite = 3;     // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
inline constexpr int kGranularityMinimum = 0;  // CU_MEM_ALLOC_GRANULARITY_MINIMUM

struct Location {  // CUmemLocation
  int type;
  int id;
};

struct AllocationProp {  // CUmemAllocationProp (v1)
  int type;
  int requested_handle_types;
  Location location;
  void* win32_handle_meta_data;
  struct {
    unsigned char compression_type;
    unsigned char gpu_direct_rdma_capable;
    unsigned short usage;
    unsigned char reserved[4];
  } alloc_flags;
};

struct AccessDesc {  // CUmemAccessDesc (v1)
  Location location;
  int flags;
};

struct Api {
  Result (*init)(unsigned int);                                    // cuInit
  Result (*device_get)(Device*, int);                              // cuDeviceGet
  Result (*device_get_attribute)(int*, int, Device);               // cuDeviceGetAttribute
  Result (*primary_ctx_retain)(Context*, Device);                  // cuDevicePrimaryCtxRetain
  Result (*ctx_set_current)(Context);                              // cuCtxSetCurrent
  Result (*get_granularity)(size_t*, const AllocationProp*, int);  // cuMemGetAllocationGranularity
  Result (*address_reserve)(DevicePtr*, size_t, size_t, DevicePtr,
                            unsigned long long);                                 // cuMemAddressReserve
  Result (*address_free)(DevicePtr, size_t);                                     // cuMemAddressFree
  Result (*create)(Handle*, size_t, const AllocationProp*, unsigned long long);  // cuMemCreate
  Result (*release)(Handle);                                                     // cuMemRelease
  Result (*map)(DevicePtr, size_t, size_t, Handle, unsigned long long);          // cuMemMap
  Result (*unmap)(DevicePtr, size_t);                                            // cuMemUnmap
  Result (*set_access)(DevicePtr, size_t, const AccessDesc*, size_t);            // cuMemSetAccess
  Result (*get_error_string)(Result, const char**);                              // cuGetErrorString
};

// Symbol names in the order of Api's members.
inline constexpr const char* kSymbols[] = {"cuInit",
                                           "cuDeviceGet",
                                           "cuDeviceGetAttribute",
                                           "cuDevicePrimaryCtxRetain",
                                           "cuCtxSetCurrent",
                                           "cuMemGetAllocationGranularity",
                                           "cuMemAddressReserve",
                                           "cuMemAddressFree",
                                           "cuMemCreate",
                                           "cuMemRelease",
                                           "cuMemMap",
                                           "cuMemUnmap",
                                           "cuMemSetAccess",
                                           "cuGetErrorString"};
static_assert(sizeof(kSymbols) / sizeof(kSymbols[0]) * sizeof(void*) == sizeof(Api));

}  // namespace gantry::memory::internal::cu
