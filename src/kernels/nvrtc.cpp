// NVRTC loaded with dlopen, and compile_cuda() over it with the on-disk cache.
#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "gantry/kernels/compile.h"
#include "kernels/cache.h"

namespace gantry::kernels {

namespace {

using Program = struct _nvrtcProgram*;
using NvResult = int;  // nvrtcResult; 0 = NVRTC_SUCCESS

struct NvrtcApi {
  NvResult (*version)(int*, int*);
  NvResult (*create_program)(Program*, const char*, const char*, int, const char* const*, const char* const*);
  NvResult (*compile_program)(Program, int, const char* const*);
  NvResult (*get_log_size)(Program, size_t*);
  NvResult (*get_log)(Program, char*);
  NvResult (*get_ptx_size)(Program, size_t*);
  NvResult (*get_ptx)(Program, char*);
  NvResult (*get_cubin_size)(Program, size_t*);
  NvResult (*get_cubin)(Program, char*);
  NvResult (*add_name_expression)(Program, const char*);
  NvResult (*get_lowered_name)(Program, const char*, const char**);
  NvResult (*destroy_program)(Program*);
  const char* (*error_string)(NvResult);
};
constexpr const char* kNvrtcSymbols[] = {
    "nvrtcVersion",       "nvrtcCreateProgram",     "nvrtcCompileProgram", "nvrtcGetProgramLogSize",
    "nvrtcGetProgramLog", "nvrtcGetPTXSize",        "nvrtcGetPTX",         "nvrtcGetCUBINSize",
    "nvrtcGetCUBIN",      "nvrtcAddNameExpression", "nvrtcGetLoweredName", "nvrtcDestroyProgram",
    "nvrtcGetErrorString"};
static_assert(std::size(kNvrtcSymbols) * sizeof(void*) == sizeof(NvrtcApi));

struct Nvrtc {
  NvrtcApi api{};
  std::string version;  // "13.0"
  std::string library;  // where it was loaded from
  Status status;
};

// Loaded once per process, never unloaded. The normal loader path first (LD_LIBRARY_PATH, the cache),
// then the toolkit's usual places.
const Nvrtc& nvrtc() {
  static const Nvrtc n = [] {
    Nvrtc out;
    const char* candidates[] = {"libnvrtc.so.13", "/usr/local/cuda/lib64/libnvrtc.so.13",
                                "/usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so.13"};
    void* lib = nullptr;
    std::string errors;
    for (const char* c : candidates) {
      lib = ::dlopen(c, RTLD_NOW | RTLD_LOCAL);
      if (lib) {
        out.library = c;
        break;
      }
      const char* e = ::dlerror();
      errors += std::string(errors.empty() ? "" : "; ") + (e ? e : c);
    }
    if (!lib) {
      out.status = Unavailable(
          "NVRTC (libnvrtc.so.13) cannot be loaded, so CUDA kernels cannot be compiled: " + errors +
          ". Install the CUDA 13 toolkit's NVRTC (cuda-nvrtc-13-0) or add its "
          "lib64 directory to LD_LIBRARY_PATH");
      return out;
    }
    void** slots = reinterpret_cast<void**>(&out.api);
    for (size_t i = 0; i < std::size(kNvrtcSymbols); ++i) {
      slots[i] = ::dlsym(lib, kNvrtcSymbols[i]);
      if (!slots[i]) {
        out.status =
            Unavailable(out.library + " lacks " + kNvrtcSymbols[i] + "; NVRTC 12.0 or later is needed");
        return out;
      }
    }
    int major = 0, minor = 0;
    out.api.version(&major, &minor);
    out.version = std::to_string(major) + "." + std::to_string(minor);
    return out;
  }();
  return n;
}

std::string nv_error(NvResult r) {
  const char* s = nvrtc().api.error_string ? nvrtc().api.error_string(r) : nullptr;
  return std::string(s ? s : "NVRTC error") + " (" + std::to_string(r) + ")";
}

// "sm_90a" -> "compute_90a" for PTX; "compute_..." kept.
std::string virtual_arch(const std::string& arch) {
  if (arch.rfind("sm_", 0) == 0) return "compute_" + arch.substr(3);
  return arch;
}

bool valid_arch(const std::string& arch) {
  std::string digits;
  if (arch.rfind("sm_", 0) == 0)
    digits = arch.substr(3);
  else if (arch.rfind("compute_", 0) == 0)
    digits = arch.substr(8);
  else
    return false;
  if (!digits.empty() && (digits.back() == 'a' || digits.back() == 'f')) digits.pop_back();
  if (digits.size() < 2 || digits.size() > 3) return false;
  for (char c : digits)
    if (c < '0' || c > '9') return false;
  return true;
}

}  // namespace

std::filesystem::path default_cache_dir() {
  if (const char* d = std::getenv("GANTRY_KERNEL_CACHE"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::filesystem::path(x) / "gantry" / "kernels";
  if (const char* h = std::getenv("HOME"); h && *h)
    return std::filesystem::path(h) / ".cache" / "gantry" / "kernels";
  std::error_code ec;
  auto tmp = std::filesystem::temp_directory_path(ec);
  return (ec ? std::filesystem::path("/tmp") : tmp) / "gantry-kernels";
}

Result<std::string> cuda_arch_for(const hw::Device& device) {
  if (!device.compute_capability || device.compute_capability->empty())
    return InvalidArgument("device " + device.id + " (" + device.name +
                           ") reports no CUDA compute capability; pass the arch explicitly (--arch sm_XY)");
  const std::string& cc = *device.compute_capability;
  const auto dot = cc.find('.');
  const std::string major = cc.substr(0, dot);
  const std::string minor = dot == std::string::npos ? "0" : cc.substr(dot + 1);
  auto digits = [](const std::string& s) {
    if (s.empty() || s.size() > 2) return false;
    for (char c : s)
      if (c < '0' || c > '9') return false;
    return true;
  };
  if (!digits(major) || !digits(minor) || minor.size() != 1)
    return InvalidArgument("device " + device.id + " has compute capability '" + cc + "', not X.Y");
  // Hopper's arch-specific target (wgmma, setmaxnreg, TMA multicast): cubins for sm_90a run on 9.0 only,
  // which is exactly the device compiled for.
  if (major == "9" && minor == "0") return std::string("sm_90a");
  return "sm_" + major + minor;
}

Result<std::string> nvrtc_version() {
  const Nvrtc& n = nvrtc();
  if (!n.status.ok()) return n.status;
  return n.version;
}

Result<CompiledKernel> compile_cuda(std::string_view source, std::string_view entry,
                                    const CudaCompileOptions& options) {
  const Nvrtc& n = nvrtc();
  if (!n.status.ok()) return n.status;
  if (entry.empty()) return InvalidArgument("no kernel entry name given (--entry)");
  if (!valid_arch(options.arch))
    return InvalidArgument("'" + options.arch +
                           "' is not a CUDA architecture; use sm_XY, sm_XYa or compute_XY");
  const bool ptx = options.output == CudaOutput::kPtx;
  if (!ptx && options.arch.rfind("compute_", 0) == 0)
    return InvalidArgument("a cubin needs a real architecture (sm_XY), not " + options.arch +
                           "; ask for PTX (.ptx) for a virtual one");
  const std::string arch = ptx ? virtual_arch(options.arch) : options.arch;

  std::vector<std::string> opts = {"--gpu-architecture=" + arch, "--std=c++17", "-default-device"};
  for (const auto& f : options.flags) opts.push_back(f);
  std::string key = "cuda\nnvrtc=" + n.version + "\narch=" + arch + "\noutput=" + (ptx ? "ptx" : "cubin") +
                    "\nentry=" + std::string(entry) + "\nname=" + options.source_name + "\noptions=";
  for (const auto& o : opts) key += o + "\x1f";
  key += "\nsource=";
  key += source;

  CompiledKernel out;
  out.output = options.output;
  out.arch = arch;
  out.compiler = "NVRTC " + n.version;
  const internal::KernelCache cache(options.cache_dir.empty() ? default_cache_dir() : options.cache_dir);
  const std::string_view suffix = ptx ? ".ptx.gk" : ".cubin.gk";
  if (options.use_cache) {
    if (auto hit = cache.read(key, suffix)) {
      const auto nul = hit->payload.find('\0');
      if (nul != std::string::npos) {
        out.lowered_name = hit->payload.substr(0, nul);
        out.binary = hit->payload.substr(nul + 1);
        out.log = std::move(hit->log);
        out.cache_hit = true;
        return out;
      }
    }
  }

  const auto t0 = std::chrono::steady_clock::now();
  const NvrtcApi& a = n.api;
  Program prog = nullptr;
  const std::string src(source);
  if (NvResult r = a.create_program(&prog, src.c_str(), options.source_name.c_str(), 0, nullptr, nullptr);
      r != 0)
    return Internal("nvrtcCreateProgram failed: " + nv_error(r));
  struct Destroy {
    const NvrtcApi& a;
    Program& p;
    ~Destroy() { a.destroy_program(&p); }
  } destroy{a, prog};
  const std::string name_expr(entry);
  a.add_name_expression(prog, name_expr.c_str());
  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());
  const NvResult compiled = a.compile_program(prog, static_cast<int>(argv.size()), argv.data());
  size_t log_size = 0;
  a.get_log_size(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 0) a.get_log(prog, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (compiled != 0)
    return InvalidArgument("compiling " + options.source_name + " (entry " + name_expr + ", " + arch +
                           ") with " + out.compiler + " failed:\n" + log);
  const char* lowered = nullptr;
  if (a.get_lowered_name(prog, name_expr.c_str(), &lowered) != 0 || lowered == nullptr)
    return NotFound(options.source_name + " has no __global__ function '" + name_expr + "' (check --entry)");
  out.lowered_name = lowered;
  size_t size = 0;
  if (NvResult r = ptx ? a.get_ptx_size(prog, &size) : a.get_cubin_size(prog, &size); r != 0)
    return Internal("reading the compiled binary from NVRTC failed: " + nv_error(r));
  out.binary.assign(size, '\0');
  if (NvResult r = ptx ? a.get_ptx(prog, out.binary.data()) : a.get_cubin(prog, out.binary.data()); r != 0)
    return Internal("reading the compiled binary from NVRTC failed: " + nv_error(r));
  if (ptx)
    while (!out.binary.empty() && out.binary.back() == '\0') out.binary.pop_back();
  out.log = std::move(log);
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (options.use_cache) {
    // A cache that cannot be written costs the next load a compile, nothing else.
    (void)cache.write(key, suffix, {out.log, out.lowered_name + '\0' + out.binary});
  }
  return out;
}

}  // namespace gantry::kernels
