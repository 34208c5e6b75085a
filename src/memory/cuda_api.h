// The part of the CUDA driver API (cuda.h) Gantry calls (the VMM backing here, the kernel executor in
// kernels/), declared here so that building needs no CUDA headers. Layouts and values match cuda.h
// (CUDA 11.2 and later); functions are looked up by name in libcuda.so.1 at run time, once per process
// (driver() below).
#pragma once

#include <cstdint>
#include <string>

#include "gantry/core/status.h"

namespace gantry::memory::internal::cu {

using Result = int;  // CUresult
inline constexpr Result kSuccess = 0;
using Device = int;                    // CUdevice
using Context = struct CUctx_st*;      // CUcontext
using DevicePtr = unsigned long long;  // CUdeviceptr
using Handle = unsigned long long;     // CUmemGenericAllocationHandle
using Module = struct CUmod_st*;       // CUmodule
using Function = struct CUfunc_st*;    // CUfunction
using Stream = struct CUstream_st*;    // CUstream

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
  // Used by the kernel executor (kernels/).
  Result (*driver_get_version)(int*);                                           // cuDriverGetVersion
  Result (*device_get_count)(int*);                                             // cuDeviceGetCount
  Result (*ctx_synchronize)();                                                  // cuCtxSynchronize
  Result (*module_load_data_ex)(Module*, const void*, unsigned, int*, void**);  // cuModuleLoadDataEx
  Result (*module_unload)(Module);                                              // cuModuleUnload
  Result (*module_get_function)(Function*, Module, const char*);                // cuModuleGetFunction
  Result (*func_get_attribute)(int*, int, Function);                            // cuFuncGetAttribute
  Result (*func_set_attribute)(Function, int, int);                             // cuFuncSetAttribute
  Result (*launch_kernel)(Function, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                          Stream, void**, void**);        // cuLaunchKernel
  Result (*stream_synchronize)(Stream);                   // cuStreamSynchronize
  Result (*memcpy_htod)(DevicePtr, const void*, size_t);  // cuMemcpyHtoD_v2
  Result (*memcpy_dtoh)(void*, DevicePtr, size_t);        // cuMemcpyDtoH_v2
  Result (*memset_d8)(DevicePtr, unsigned char, size_t);  // cuMemsetD8_v2
  Result (*get_error_name)(Result, const char**);         // cuGetErrorName
  // cuOccupancyMaxPotentialBlockSize(min_grid, block, function, block_to_dynamic_smem, dynamic_smem, limit)
  Result (*occupancy_max_potential_block_size)(int*, int*, Function, size_t (*)(int), size_t, int);
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
                                           "cuGetErrorString",
                                           "cuDriverGetVersion",
                                           "cuDeviceGetCount",
                                           "cuCtxSynchronize",
                                           "cuModuleLoadDataEx",
                                           "cuModuleUnload",
                                           "cuModuleGetFunction",
                                           "cuFuncGetAttribute",
                                           "cuFuncSetAttribute",
                                           "cuLaunchKernel",
                                           "cuStreamSynchronize",
                                           "cuMemcpyHtoD_v2",
                                           "cuMemcpyDtoH_v2",
                                           "cuMemsetD8_v2",
                                           "cuGetErrorName",
                                           "cuOccupancyMaxPotentialBlockSize"};
static_assert(sizeof(kSymbols) / sizeof(kSymbols[0]) * sizeof(void*) == sizeof(Api));

// CUfunction_attribute values read by the kernel executor.
inline constexpr int kFuncMaxThreadsPerBlock = 0;     // CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
inline constexpr int kFuncSharedSizeBytes = 1;        // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
inline constexpr int kFuncLocalSizeBytes = 3;         // CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES
inline constexpr int kFuncNumRegs = 4;                // CU_FUNC_ATTRIBUTE_NUM_REGS
inline constexpr int kFuncMaxDynamicSharedBytes = 8;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
// CUdevice_attribute values.
inline constexpr int kAttrComputeCapabilityMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
inline constexpr int kAttrComputeCapabilityMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
inline constexpr int kAttrMaxSharedPerBlockOptin =
    97;  // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN

// libcuda.so.1 loaded once per process and never unloaded (the driver dislikes dlclose). `status` is
// Unavailable with the reason (no library, a symbol missing, cuInit failed) when `api` cannot be used.
struct Driver {
  Api api{};
  Status status;
};
const Driver& driver();

// "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered (700)".
std::string error_text(Result r);

}  // namespace gantry::memory::internal::cu
