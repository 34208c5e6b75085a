// The block pool against the C library's aligned_alloc on the allocations ONNX Runtime really makes:
// a recording OrtAllocator registered on the env captures the sequence of Alloc/Reserve sizes and
// Frees of loading PaddleOCR det and running it once; both allocators then replay that sequence
// alternately, several rounds; the ratio is of the medians. The pool is one without a budget of its own
// (its ledger under its own lock); a pool charging a given budget, as the runtime's do, is timed beside
// it for the record. Prints
//   BENCH pool-alloc-vs-malloc ratio=<pool alloc+free time / aligned_alloc+free time>
#include <onnxruntime_cxx_api.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <random>
#include <unordered_map>
#include <vector>

#include "backend/onnx/pool_allocator.h"
#include "bench_timing.h"
#include "gantry/backend/onnx/ort_env.h"
#include "gantry/memory/block_pool.h"
#include "gantry/memory/budget.h"
#include "gantry/memory/owner_scope.h"

namespace {

namespace fs = std::filesystem;

struct Event {
  bool alloc;
  uint32_t id;  // which allocation
  size_t size;  // for alloc
};

// An OrtAllocator that serves from aligned_alloc and writes down every call.
struct Recorder {
  OrtAllocator base{};
  Ort::MemoryInfo info = Ort::MemoryInfo::CreateCpu(OrtDeviceAllocator, OrtMemTypeDefault);
  std::mutex mu;
  std::vector<Event> events;
  std::unordered_map<void*, uint32_t> ids;
  uint32_t next = 0;

  Recorder() {
    base.version = ORT_API_VERSION;
    base.Alloc = [](OrtAllocator* s, size_t n) { return reinterpret_cast<Recorder*>(s)->alloc(n); };
    base.Reserve = base.Alloc;
    base.Free = [](OrtAllocator* s, void* p) { reinterpret_cast<Recorder*>(s)->free(p); };
    base.Info = [](const OrtAllocator* s) -> const OrtMemoryInfo* {
      return reinterpret_cast<const Recorder*>(s)->info;
    };
  }
  void* alloc(size_t n) {
    if (n == 0) return nullptr;
    void* p = std::aligned_alloc(64, (n + 63) / 64 * 64);
    std::lock_guard lock(mu);
    ids[p] = next;
    events.push_back({true, next++, n});
    return p;
  }
  void free(void* p) {
    if (!p) return;
    std::lock_guard lock(mu);
    auto it = ids.find(p);
    if (it != ids.end()) {
      events.push_back({false, it->second, 0});
      ids.erase(it);
    }
    std::free(p);
  }
};

std::vector<Event> record(const fs::path& model) {
  const OrtApi& api = Ort::GetApi();
  Ort::Env& env = (*gantry::onnx::OrtRuntime::get())->env();
  static Recorder rec;  // ORT may hold it until the env goes
  if (OrtStatus* st = api.RegisterAllocator(env, &rec.base)) {
    api.ReleaseStatus(st);
    if (OrtStatus* u = api.UnregisterAllocator(env, rec.info)) api.ReleaseStatus(u);
    if (OrtStatus* again = api.RegisterAllocator(env, &rec.base)) {
      std::fprintf(stderr, "cannot register the recording allocator: %s\n", api.GetErrorMessage(again));
      std::exit(1);
    }
  }
  {
    Ort::SessionOptions so;
    so.SetIntraOpNumThreads(1);
    so.SetInterOpNumThreads(1);
    so.AddConfigEntry(gantry::onnx::kUseEnvAllocators, "1");
    Ort::Session session(env, model.c_str(), so);
    std::vector<float> x(1 * 3 * 256 * 256);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> d(-1, 1);
    for (auto& v : x) v = d(rng);
    const int64_t dims[] = {1, 3, 256, 256};
    auto mem = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
    Ort::Value in = Ort::Value::CreateTensor<float>(mem, x.data(), x.size(), dims, 4);
    Ort::AllocatorWithDefaultOptions a;
    std::string in_name = session.GetInputNameAllocated(0, a).get();
    std::string out_name = session.GetOutputNameAllocated(0, a).get();
    const char* in_c = in_name.c_str();
    const char* out_c = out_name.c_str();
    auto out = session.Run(Ort::RunOptions{nullptr}, &in_c, &in, 1, &out_c, 1);
  }
  if (OrtStatus* u = api.UnregisterAllocator(env, rec.info)) api.ReleaseStatus(u);
  std::lock_guard lock(rec.mu);
  return rec.events;
}

using gantry::bench::median;
using gantry::bench::thread_cpu_ns;

}  // namespace

int main() {
  const fs::path det = fs::path(GANTRY_DEPS_DIR) / "models" / "paddleocr" / "ch_PP-OCRv4_det_infer.onnx";
  if (!fs::exists(det)) {
    std::fprintf(stderr, "%s is missing (run make setup)\n", det.c_str());
    return 1;
  }
  const std::vector<Event> events = record(det);
  uint32_t count = 0;
  uint64_t bytes = 0;
  for (const auto& e : events)
    if (e.alloc) {
      ++count;
      bytes += e.size;
    }
  std::printf(
      "recorded %zu events: %u allocations (%.1f MiB) while loading PaddleOCR det and running it once\n",
      events.size(), count, static_cast<double>(bytes) / (1 << 20));
  std::vector<void*> slots(count, nullptr);

  gantry::memory::BlockPool pool(gantry::memory::make_host_backing());
  // The runtime's pools charge a budget shared by every pool of the device: under its own lock, a
  // second one per allocation. Timed too, for the record (not the goal's ratio).
  gantry::memory::Budget budget("cpu", 64ull << 30);
  gantry::memory::BlockPool budgeted(gantry::memory::make_host_backing(), {.budget = &budget});
  gantry::memory::OwnerScope scope("det");  // as OnnxModel runs it
  auto replay = [&](gantry::memory::BlockPool& target) {
    for (const auto& e : events) {
      if (e.alloc) {
        slots[e.id] = *target.allocate(e.size);
      } else {
        (void)target.free(slots[e.id]);
        slots[e.id] = nullptr;
      }
    }
    for (auto& p : slots)
      if (p) {
        (void)target.free(p);
        p = nullptr;
      }
  };
  auto replay_pool = [&] { replay(pool); };
  auto replay_budgeted = [&] { replay(budgeted); };
  auto replay_malloc = [&] {
    for (const auto& e : events) {
      if (e.alloc) {
        slots[e.id] = std::aligned_alloc(64, (e.size + 63) / 64 * 64);
      } else {
        std::free(slots[e.id]);
        slots[e.id] = nullptr;
      }
    }
    for (auto& p : slots)
      if (p) {
        std::free(p);
        p = nullptr;
      }
  };
  // This thread's CPU time: on a shared machine, time spent descheduled would be noise.
  auto time = [](auto&& f, int reps) {
    const double t0 = thread_cpu_ns();
    for (int i = 0; i < reps; ++i) f();
    return (thread_cpu_ns() - t0) / reps;
  };
  const int reps = 20, rounds = 41;
  time(replay_pool, reps);  // warm all three
  time(replay_budgeted, reps);
  time(replay_malloc, reps);
  std::vector<double> p_ns, m_ns, b_ns;
  for (int r = 0; r < rounds; ++r) {
    if (r % 2 == 0) {
      p_ns.push_back(time(replay_pool, reps));
      m_ns.push_back(time(replay_malloc, reps));
    } else {
      m_ns.push_back(time(replay_malloc, reps));
      p_ns.push_back(time(replay_pool, reps));
    }
    if (r % 4 == 0) b_ns.push_back(time(replay_budgeted, reps));
  }
  const double p = median(p_ns), m = median(m_ns), b = median(b_ns);
  const auto st = pool.stats();
  std::printf(
      "replay of %zu events: pool %.1f us, aligned_alloc %.1f us (thread CPU time, median of %d rounds of "
      "%d); pool: %llu "
      "blocks mapped, %llu bad frees\n",
      events.size(), p / 1000, m / 1000, rounds, reps, static_cast<unsigned long long>(st.blocks_mapped),
      static_cast<unsigned long long>(st.bad_frees));
  std::printf("a pool charging a given budget (the runtime's): %.1f us, %.3f x aligned_alloc\n", b / 1000,
              b / m);
  std::printf("BENCH pool-alloc-vs-malloc ratio=%.3f\n", p / m);
  return st.bad_frees == 0 && budgeted.stats().bad_frees == 0 ? 0 : 1;
}
