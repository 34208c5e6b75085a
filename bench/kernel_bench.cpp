// The kernel executor's costs. Prints
//   BENCH kernel-cache-hit-load ms=<median KernelExecutor::load of a cached CPU kernel: cache lookup,
//         checksum, dlopen>
//   BENCH kernel-cache-hit-load-cuda ms=<median cached CUDA load: NVRTC cache lookup (+ cuModuleLoadData on a
//         GPU)>                                                   (where NVRTC is present)
//   BENCH kernel-launch-vs-driver ratio=<Gantry launch of an empty kernel / bare cuLaunchKernel of the same
//         function, launches alternating in batches, same run>  (on a GPU only)
// and a plain line saying why a measurement is skipped. The cache lives in a fresh temporary directory, so
// the first load of each kernel compiles (its time is printed too) and the timed ones are cache hits.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "gantry/kernels/executor.h"
#include "memory/cuda_api.h"

namespace {

namespace fs = std::filesystem;
using namespace gantry::kernels;
namespace cu = gantry::memory::internal::cu;

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

const char* kCpuKernel =
    "void scale(const gantry_kernel_ctx* ctx, float* x, float a, int n) {\n"
    "  GANTRY_FOR_EACH_THREAD(ctx, t) {\n"
    "    unsigned i = ctx->block_idx.x * ctx->block_dim.x + t.x;\n"
    "    if (i < (unsigned)n) x[i] *= a;\n"
    "  }\n"
    "}\n";
const char* kCudaEmpty = "extern \"C\" __global__ void empty_kernel(float* x, int n) {}\n";

// Median of `reps` cached loads (each followed by unload, so every load really opens the binary again).
double cached_load_ms(KernelExecutor& ex, const char* src, const char* entry, const std::string& device,
                      int reps) {
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto h = ex.load(src, entry, device);
    const double ms = ms_since(t0);
    if (!h.ok() || !ex.info(*h)->cache_hit) {
      std::fprintf(stderr, "kernel_bench: load %d of %s was not a cache hit: %s\n", i, entry,
                   h.ok() ? "compiled again" : h.status().to_string().c_str());
      return -1;
    }
    times.push_back(ms);
    (void)ex.unload(*h);
  }
  return gantry::bench::median(times);
}

void launch_vs_driver(KernelExecutor& ex, const fs::path& cache) {
  auto h = ex.load(kCudaEmpty, "empty_kernel", "cuda:0");
  if (!h.ok()) {
    std::printf("kernel-launch-vs-driver skipped: %s\n", h.status().to_string().c_str());
    return;
  }
  auto x = ex.allocate("cuda:0", gantry::DType::kFloat32, {256});
  if (!x.ok()) {
    std::printf("kernel-launch-vs-driver skipped: %s\n", x.status().to_string().c_str());
    return;
  }
  // The same cubin loaded straight through the driver for the bare launches.
  CudaCompileOptions o;
  o.arch = ex.info(*h)->target.substr(0, ex.info(*h)->target.find(' '));
  o.cache_dir = cache;
  o.source_name = "kernel.cu";
  auto bin = compile_cuda(kCudaEmpty, "empty_kernel", o);
  const cu::Api& a = cu::driver().api;
  cu::Module module = nullptr;
  cu::Function fn = nullptr;
  if (!bin.ok() || a.module_load_data_ex(&module, bin->binary.data(), 0, nullptr, nullptr) != cu::kSuccess ||
      a.module_get_function(&fn, module, "empty_kernel") != cu::kSuccess) {
    std::printf("kernel-launch-vs-driver skipped: the bare driver path could not load the kernel\n");
    return;
  }
  const KernelArg args[] = {KernelArg::tensor(*x), KernelArg::i32(256)};
  cu::DevicePtr dptr = reinterpret_cast<uintptr_t>(x->data());
  int n = 256;
  void* params[] = {&dptr, &n};
  constexpr int kBatch = 2000;
  constexpr int kRounds = 15;
  std::vector<double> gantry_ns, bare_ns;
  for (int round = 0; round < kRounds + 1; ++round) {  // round 0 warms up
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kBatch; ++i) (void)ex.launch(*h, args, {1}, {32});
    (void)ex.synchronize("cuda:0");
    const double g = ms_since(t0) * 1e6 / kBatch;
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kBatch; ++i) a.launch_kernel(fn, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr);
    a.ctx_synchronize();
    const double b = ms_since(t0) * 1e6 / kBatch;
    if (round > 0) {
      gantry_ns.push_back(g);
      bare_ns.push_back(b);
    }
  }
  const double g = gantry::bench::median(gantry_ns), b = gantry::bench::median(bare_ns);
  std::printf("kernel launch: Gantry %.0f ns, bare cuLaunchKernel %.0f ns per launch (median of %d x %d)\n",
              g, b, kRounds, kBatch);
  std::printf("BENCH kernel-launch-vs-driver ratio=%.3f\n", g / b);
  a.module_unload(module);
}

}  // namespace

int main() {
  const fs::path cache = fs::temp_directory_path() / ("gantry-kernel-bench-" + std::to_string(::getpid()));
  ExecutorOptions options;
  options.cache_dir = cache;
  KernelExecutor ex(options);

  if (gantry::Status s = ex.available("cpu"); !s.ok()) {
    std::printf("kernel-cache-hit-load skipped: %s\n", s.to_string().c_str());
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    auto first = ex.load(kCpuKernel, "scale", "cpu");
    if (!first.ok()) {
      std::printf("kernel-cache-hit-load failed: %s\n", first.status().to_string().c_str());
      return 1;
    }
    std::printf("cpu kernel: first load (compile) %.1f ms\n", ms_since(t0));
    (void)ex.unload(*first);
    const double ms = cached_load_ms(ex, kCpuKernel, "scale", "cpu", 50);
    if (ms < 0) return 1;
    std::printf("BENCH kernel-cache-hit-load ms=%.3f\n", ms);
  }

  const bool gpu = ex.available("cuda:0").ok();
  if (auto v = nvrtc_version(); !v.ok()) {
    std::printf("kernel-cache-hit-load-cuda skipped: %s\n", v.status().to_string().c_str());
  } else if (gpu) {
    const auto t0 = std::chrono::steady_clock::now();
    auto first = ex.load(kCudaEmpty, "empty_kernel", "cuda:0");
    if (first.ok()) {
      std::printf("cuda kernel: first load (NVRTC %s) %.1f ms\n", v->c_str(), ms_since(t0));
      (void)ex.unload(*first);
      std::printf("BENCH kernel-cache-hit-load-cuda ms=%.3f\n",
                  cached_load_ms(ex, kCudaEmpty, "empty_kernel", "cuda:0", 50));
    }
  } else {
    // No GPU: the compile half of a load (NVRTC through the cache), which is what a GPU load adds to
    // cuModuleLoadData.
    CudaCompileOptions o;
    o.cache_dir = cache;
    const auto t0 = std::chrono::steady_clock::now();
    auto first = compile_cuda(kCudaEmpty, "empty_kernel", o);
    std::printf("cuda kernel: first compile (NVRTC %s, %s) %.1f ms\n", v->c_str(), o.arch.c_str(),
                ms_since(t0));
    std::vector<double> times;
    for (int i = 0; first.ok() && i < 50; ++i) {
      const auto t1 = std::chrono::steady_clock::now();
      auto hit = compile_cuda(kCudaEmpty, "empty_kernel", o);
      times.push_back(ms_since(t1));
      if (!hit.ok() || !hit->cache_hit) return 1;
    }
    if (!times.empty()) {
      std::printf("kernel-cache-hit-load-cuda: no GPU, so the cache lookup only (no cuModuleLoadData)\n");
      std::printf("BENCH kernel-cache-hit-load-cuda ms=%.3f\n", gantry::bench::median(times));
    }
  }

  if (gpu)
    launch_vs_driver(ex, cache);
  else
    std::printf("kernel-launch-vs-driver skipped: no GPU (%s)\n", ex.available("cuda:0").to_string().c_str());

  std::error_code ec;
  fs::remove_all(cache, ec);
  return 0;
}
