/* A stand-in libcuda.so.1 for machines without a GPU: exercises Gantry's CUDA glue (driver loading, arch
 * from the driver, the VMM pool, cubin loading, symbol lookup, the cuLaunchKernel parameter array, copies,
 * sticky-error handling) end to end. "Device memory" is host memory; a launch of `vector_add` is carried
 * out on the CPU from the kernelParams it receives, and `fault` leaves CUDA_ERROR_ILLEGAL_ADDRESS for the
 * next synchronize, as a real fault would. Built by tests/cli/kernel_cli_test.cpp; never shipped. */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

static int sticky_error = 0;
static const char* loaded_image = 0;
static size_t loaded_size = 0;
static char function_names[16][64];
static int functions = 0;

CUresult cuInit(unsigned flags) {
  (void)flags;
  return 0;
}
CUresult cuDriverGetVersion(int* v) {
  *v = 13000;
  return 0;
}
CUresult cuDeviceGetCount(int* n) {
  *n = 1;
  return 0;
}
CUresult cuDeviceGet(int* d, int ordinal) {
  *d = ordinal;
  return ordinal == 0 ? 0 : 101;
}
CUresult cuDeviceGetAttribute(int* v, int attr, int dev) {
  (void)dev;
  switch (attr) {
    case 75:
      *v = 9;
      break; /* compute capability major */
    case 76:
      *v = 0;
      break; /* minor */
    case 97:
      *v = 227 * 1024;
      break; /* max shared per block (opt-in) */
    case 102:
      *v = 1;
      break; /* VMM supported */
    default:
      *v = 0;
  }
  return 0;
}
CUresult cuDevicePrimaryCtxRetain(void** ctx, int dev) {
  (void)dev;
  *ctx = (void*)0x1;
  return 0;
}
CUresult cuCtxSetCurrent(void* ctx) {
  (void)ctx;
  return 0;
}
CUresult cuCtxSynchronize(void) {
  int e = sticky_error;
  return e;
}
CUresult cuStreamSynchronize(void* s) {
  (void)s;
  return sticky_error;
}
CUresult cuMemGetAllocationGranularity(size_t* g, const void* prop, int option) {
  (void)prop;
  (void)option;
  *g = 2u << 20;
  return 0;
}
CUresult cuMemAddressReserve(CUdeviceptr* p, size_t size, size_t align, CUdeviceptr addr,
                             unsigned long long f) {
  (void)align;
  (void)addr;
  (void)f;
  void* m = mmap(0, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return 2;
  *p = (CUdeviceptr)(uintptr_t)m;
  return 0;
}
CUresult cuMemAddressFree(CUdeviceptr p, size_t size) {
  munmap((void*)(uintptr_t)p, size);
  return 0;
}
CUresult cuMemCreate(unsigned long long* h, size_t size, const void* prop, unsigned long long f) {
  (void)size;
  (void)prop;
  (void)f;
  *h = 1;
  return 0;
}
CUresult cuMemRelease(unsigned long long h) {
  (void)h;
  return 0;
}
CUresult cuMemMap(CUdeviceptr p, size_t s, size_t o, unsigned long long h, unsigned long long f) {
  (void)p;
  (void)s;
  (void)o;
  (void)h;
  (void)f;
  return 0;
}
CUresult cuMemUnmap(CUdeviceptr p, size_t s) {
  (void)p;
  (void)s;
  return 0;
}
CUresult cuMemSetAccess(CUdeviceptr p, size_t s, const void* d, size_t n) {
  (void)p;
  (void)s;
  (void)d;
  (void)n;
  return 0;
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
  if (sticky_error) return sticky_error;
  memcpy((void*)(uintptr_t)dst, src, n);
  return 0;
}
CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
  if (sticky_error) return sticky_error;
  memcpy(dst, (const void*)(uintptr_t)src, n);
  return 0;
}
CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n) {
  memset((void*)(uintptr_t)dst, v, n);
  return 0;
}

/* A cubin is an ELF file: anything else is CUDA_ERROR_INVALID_IMAGE (200). */
CUresult cuModuleLoadDataEx(void** module, const void* image, unsigned n, int* opts, void** vals) {
  (void)n;
  (void)opts;
  (void)vals;
  if (memcmp(image,
             "\x7f"
             "ELF",
             4) != 0)
    return 200;
  loaded_image = (const char*)image;
  /* ELF64: the section header table (e_shoff, e_shentsize, e_shnum) ends the file. */
  uint64_t shoff;
  uint16_t shentsize, shnum;
  memcpy(&shoff, loaded_image + 0x28, 8);
  memcpy(&shentsize, loaded_image + 0x3A, 2);
  memcpy(&shnum, loaded_image + 0x3C, 2);
  loaded_size = (size_t)(shoff + (uint64_t)shentsize * shnum);
  *module = (void*)0x2;
  return 0;
}
CUresult cuModuleUnload(void* m) {
  (void)m;
  return 0;
}
/* The symbol must be in the image (CUDA_ERROR_NOT_FOUND, 500, otherwise). */
CUresult cuModuleGetFunction(void** f, void* m, const char* name) {
  (void)m;
  if (!loaded_image || !memmem(loaded_image, loaded_size, name, strlen(name)) || functions == 16) return 500;
  strncpy(function_names[functions], name, 63);
  *f = (void*)(uintptr_t)(functions + 1);
  ++functions;
  return 0;
}
CUresult cuFuncGetAttribute(int* v, int attr, void* f) {
  (void)f;
  switch (attr) {
    case 0:
      *v = 1024;
      break; /* max threads per block */
    case 4:
      *v = 16;
      break; /* registers */
    default:
      *v = 0;
  }
  return 0;
}
/* The occupancy calculator: 640 stands for whatever the real one would compute from the kernel's resources
 * (a value no other attribute has, so a test can tell it was asked). */
CUresult cuOccupancyMaxPotentialBlockSize(int* min_grid, int* block, void* f, size_t (*smem)(int), size_t dyn,
                                          int limit) {
  (void)f;
  (void)smem;
  (void)dyn;
  (void)limit;
  *min_grid = 132;
  *block = 640;
  return 0;
}
CUresult cuFuncSetAttribute(void* f, int attr, int v) {
  (void)f;
  (void)attr;
  (void)v;
  return 0;
}
CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void* stream, void** params, void** extra) {
  (void)gy;
  (void)gz;
  (void)by;
  (void)bz;
  (void)shared;
  (void)stream;
  (void)extra;
  if (sticky_error) return sticky_error;
  const char* name = function_names[(uintptr_t)f - 1];
  if (strcmp(name, "vector_add") == 0) {
    const float* a = (const float*)(uintptr_t) * (CUdeviceptr*)params[0];
    const float* b = (const float*)(uintptr_t) * (CUdeviceptr*)params[1];
    float* c = (float*)(uintptr_t) * (CUdeviceptr*)params[2];
    const int n = *(int*)params[3];
    for (unsigned i = 0; i < gx * bx; ++i)
      if (i < (unsigned)n) c[i] = a[i] + b[i];
  } else if (strcmp(name, "saxpy") == 0) {
    const float alpha = *(const float*)params[0];
    const float* x = (const float*)(uintptr_t) * (CUdeviceptr*)params[1];
    float* y = (float*)(uintptr_t) * (CUdeviceptr*)params[2];
    const long long n = *(const long long*)params[3];
    for (unsigned long long i = 0; i < (unsigned long long)gx * bx; ++i)
      if ((long long)i < n) y[i] = alpha * x[i] + y[i];
  } else if (strcmp(name, "fault") == 0) {
    sticky_error = 700; /* CUDA_ERROR_ILLEGAL_ADDRESS, reported at the next synchronize */
  }
  return 0;
}
CUresult cuGetErrorName(CUresult r, const char** s) {
  *s = r == 700 ? "CUDA_ERROR_ILLEGAL_ADDRESS" : r == 200 ? "CUDA_ERROR_INVALID_IMAGE" : "CUDA_ERROR_FAKE";
  return 0;
}
CUresult cuGetErrorString(CUresult r, const char** s) {
  *s = r == 700 ? "an illegal memory access was encountered" : "fake driver error";
  return 0;
}
/* NVRTC dlopens libcuda.so.1 too and asks it for a private export table: none here (NVRTC compiles
 * without it, as it does where no driver is installed). */
CUresult cuGetExportTable(const void** table, const void* id) {
  (void)id;
  *table = 0;
  return 801; /* CUDA_ERROR_NOT_SUPPORTED */
}
