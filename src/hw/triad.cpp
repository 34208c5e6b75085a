// The host-memory bandwidth probe (a STREAM-style triad), bounded in time and memory.
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "gantry/hw/bandwidth.h"

namespace gantry::hw {

uint64_t triad_array_bytes(const CpuInfo& cpu) {
  constexpr uint64_t kMin = 64ull << 20, kMax = 256ull << 20;
  const uint64_t llc = cpu.cache.l3_bytes.value_or(cpu.cache.l2_bytes.value_or(0));
  return std::clamp<uint64_t>(2 * llc * static_cast<uint64_t>(std::max(1, cpu.sockets)), kMin, kMax);
}

namespace {

struct FreeDeleter {
  void operator()(double* p) const { std::free(p); }
};

// 2 MiB-aligned and, when asked, marked for transparent huge pages: first touch then faults once per 2 MiB
// instead of once per 4 KiB, which is most of the probe's time in a VM. Falls back to ordinary pages
// silently.
std::unique_ptr<double[], FreeDeleter> array_of(size_t n, bool huge_pages) {
  constexpr size_t kHuge = 2u << 20;
  const size_t bytes = (n * sizeof(double) + kHuge - 1) / kHuge * kHuge;
  auto* p = static_cast<double*>(std::aligned_alloc(kHuge, bytes));
  if (p == nullptr) throw std::bad_alloc();
  if (huge_pages) ::madvise(p, bytes, MADV_HUGEPAGE);
  return std::unique_ptr<double[], FreeDeleter>(p);
}

}  // namespace

uint64_t measure_triad_bandwidth(int threads, uint64_t array_bytes, int budget_ms, bool huge_pages) {
  threads = std::max(1, threads);
  const size_t n = std::max<size_t>(1024, array_bytes / sizeof(double));
  auto a = array_of(n, huge_pages), b = array_of(n, huge_pages), c = array_of(n, huge_pages);
  auto run = [&](bool init) {
    std::vector<std::thread> pool;
    pool.reserve(static_cast<size_t>(threads));
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const size_t lo = n * t / threads, hi = n * (t + 1) / threads;
        if (init) {
          for (size_t i = lo; i < hi; ++i) a[i] = 0, b[i] = 1.0, c[i] = 2.0;  // first touch, per thread
        } else {
          for (size_t i = lo; i < hi; ++i) a[i] = b[i] + 3.0 * c[i];
        }
      });
    }
    for (auto& th : pool) th.join();
  };
  const auto start = std::chrono::steady_clock::now();
  run(true);
  double best = 0;
  for (int pass = 0; pass < 100; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    run(false);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0) best = std::max(best, 3.0 * static_cast<double>(n) * sizeof(double) / s);
    if (pass >= 1 && std::chrono::steady_clock::now() - start > std::chrono::milliseconds(budget_ms)) break;
  }
  volatile double sink = a[n / 2];  // keeps the stores observable
  (void)sink;
  return static_cast<uint64_t>(best);
}

}  // namespace gantry::hw
