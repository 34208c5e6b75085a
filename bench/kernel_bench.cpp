// The kernel executor's costs. Prints
//   BENCH kernel-cache-hit-load ratio=<median KernelExecutor::load of a cached CPU kernel (cache lookup,
//         checksum, dlopen) / median cold load of it (an empty cache: the compile)> ms=<the cached load>
//   BENCH kernel-cache-hit-load-cuda ratio=<the same for a CUDA kernel: NVRTC cache lookup (+
//         cuModuleLoadData on a GPU) / a cold NVRTC compile> ms=<the cached load>  (where NVRTC is present)
//   BENCH kernel-launch-vs-driver ratio=<Gantry launch of an empty kernel / bare cuLaunchKernel of the same
//         function, launches alternating in batches, same run>  (on a GPU only)
// and a plain line saying why a measurement is skipped. Cached and cold loads alternate, round by round,
// in this run: each cold load in a fresh, empty cache directory. A failed load is an error (exit 1).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
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

// One timed load: whether it was a cache hit, and its milliseconds.
struct Load {
  bool cache_hit = false;
  double ms = 0;
};
// Loads the kernel with its cache in `dir`, timing the load alone; nullopt (after saying why) on failure.
using LoadFn = std::function<std::optional<Load>(const fs::path& dir)>;

// Median milliseconds of cached loads and of cold loads (an empty cache: the compile) of one kernel,
// alternating in kRounds rounds, each cold load in a fresh directory under `root`.
struct HitVsCold {
  double hit_ms = 0, cold_ms = 0;
  bool ok = false;
};
HitVsCold hit_vs_cold(const char* what, const fs::path& root, const LoadFn& load) {
  constexpr int kRounds = 5, kHitsPerRound = 10;
  const fs::path warm = root / "warm";
  std::vector<double> hits, colds;
  for (int round = 0; round < kRounds; ++round) {
    const auto cold = load(root / ("cold-" + std::to_string(round)));
    if (!cold || cold->cache_hit) {
      std::fprintf(stderr, "kernel_bench: %s: a cold load %s\n", what, cold ? "hit a cache" : "failed");
      return {};
    }
    colds.push_back(cold->ms);
    if (round == 0 && !load(warm)) return {};  // fills the warm cache
    for (int i = 0; i < kHitsPerRound; ++i) {
      const auto hit = load(warm);
      if (!hit || !hit->cache_hit) {
        std::fprintf(stderr, "kernel_bench: %s: load %d was not a cache hit\n", what, i);
        return {};
      }
      hits.push_back(hit->ms);
    }
  }
  return {gantry::bench::median(hits), gantry::bench::median(colds), true};
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
  int status = 0;
  // A load through an executor of its own over `dir` (made before the clock starts), then unloaded.
  auto executor_load = [&](const fs::path& dir, const char* src, const char* entry,
                           const std::string& device) -> std::optional<Load> {
    ExecutorOptions o = options;
    o.cache_dir = dir;
    KernelExecutor e(o);
    const auto t0 = std::chrono::steady_clock::now();
    auto h = e.load(src, entry, device);
    const double ms = ms_since(t0);
    if (!h.ok()) {
      std::fprintf(stderr, "kernel_bench: %s load: %s\n", device.c_str(), h.status().to_string().c_str());
      return std::nullopt;
    }
    const Load l{e.info(*h)->cache_hit, ms};
    (void)e.unload(*h);
    return l;
  };

  if (gantry::Status s = ex.available("cpu"); !s.ok()) {
    std::printf("kernel-cache-hit-load skipped: %s\n", s.to_string().c_str());
  } else {
    const HitVsCold t = hit_vs_cold("cpu kernel", cache / "cpu", [&](const fs::path& dir) {
      return executor_load(dir, kCpuKernel, "scale", "cpu");
    });
    if (!t.ok) return 1;
    std::printf("cpu kernel: cold load (compile) %.1f ms, cached load %.3f ms (medians)\n", t.cold_ms,
                t.hit_ms);
    std::printf("BENCH kernel-cache-hit-load ratio=%.4f ms=%.3f\n", t.hit_ms / t.cold_ms, t.hit_ms);
  }

  const bool gpu = ex.available("cuda:0").ok();
  if (auto v = nvrtc_version(); !v.ok()) {
    std::printf("kernel-cache-hit-load-cuda skipped: %s\n", v.status().to_string().c_str());
  } else {
    // With a GPU, a whole load (NVRTC through the cache, then cuModuleLoadData); without one, the compile
    // half of it, which is what a GPU load adds to cuModuleLoadData.
    const HitVsCold t =
        hit_vs_cold("cuda kernel", cache / "cuda", [&](const fs::path& dir) -> std::optional<Load> {
          if (gpu) return executor_load(dir, kCudaEmpty, "empty_kernel", "cuda:0");
          CudaCompileOptions o;
          o.cache_dir = dir;
          const auto t0 = std::chrono::steady_clock::now();
          auto c = compile_cuda(kCudaEmpty, "empty_kernel", o);
          const double ms = ms_since(t0);
          if (!c.ok()) {
            std::fprintf(stderr, "kernel_bench: cuda compile: %s\n", c.status().to_string().c_str());
            return std::nullopt;
          }
          return Load{c->cache_hit, ms};
        });
    if (!t.ok) {
      status = 1;
    } else {
      std::printf("cuda kernel (NVRTC %s%s): cold %.1f ms, cached %.3f ms (medians)\n", v->c_str(),
                  gpu ? "" : "; no GPU: the cache lookup only, no cuModuleLoadData", t.cold_ms, t.hit_ms);
      std::printf("BENCH kernel-cache-hit-load-cuda ratio=%.4f ms=%.3f\n", t.hit_ms / t.cold_ms, t.hit_ms);
    }
  }

  if (gpu)
    launch_vs_driver(ex, cache);
  else
    std::printf("kernel-launch-vs-driver skipped: no GPU (%s)\n", ex.available("cuda:0").to_string().c_str());

  std::error_code ec;
  fs::remove_all(cache, ec);
  return status;
}
