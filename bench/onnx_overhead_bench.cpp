// Gantry's ONNX backend vs raw ONNX Runtime in the same process, same session options (1 intra-op
// thread), alternating blocks so both sides see the same machine state. Prints
//   BENCH onnx-overhead-<case> ratio=<gantry median / raw median>
// and the cost of the `measured` provider policy's choice on a first and a cached load, each against loading
// the model itself (what every load pays), in interleaved rounds:
//   BENCH measured-policy-first-load-<model> ratio=<first measured choice / model load> ms=<first>
//   BENCH measured-policy-cached-load-<model> ratio=<cached measured choice / model load> ms=<cached>
// A failed measurement is an error (exit 1), never a printed number.
#include <onnxruntime_cxx_api.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>

#include "bench_timing.h"
#include "gantry/backend/loader.h"
#include "gantry/backend/onnx/onnx_backend.h"
#include "gantry/backend/onnx/onnx_model.h"
#include "gantry/backend/onnx/ort_env.h"
#include "gantry/memory/block_pool.h"

namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;
using gantry::DType;
using gantry::NamedTensor;
using gantry::Shape;
using gantry::Tensor;

const fs::path kModels = fs::path(GANTRY_DEPS_DIR) / "models";

using gantry::bench::median;
using gantry::bench::thread_cpu_ns;

Tensor random_tensor(DType dt, const Shape& s, unsigned seed) {
  auto t = Tensor::allocate(dt, s).value();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  if (dt == DType::kFloat32)
    for (auto& x : t.values<float>()) x = d(rng);
  return t;
}

// The same mapping the backend uses (the raw side must build identical tensors).
ONNXTensorElementDataType ort_type(gantry::DType d) {
  return static_cast<ONNXTensorElementDataType>(gantry::onnx::ort_element_type(d));
}

// Returns false when the model is missing.
bool bench_case(const char* name, const fs::path& path, const std::vector<NamedTensor>& inputs, int block,
                int rounds) {
  if (!fs::exists(path)) {
    std::fprintf(stderr, "skipping %s: %s is missing (run make setup)\n", name, path.c_str());
    return false;
  }
  gantry::backend::Placement p;
  p.intra_op_threads = 1;
  p.inter_op_threads = 1;
  auto model = gantry::onnx::OnnxModel::open(path, p);
  if (!model.ok()) {
    std::fprintf(stderr, "%s: %s\n", name, model.status().to_string().c_str());
    return false;
  }
  Ort::SessionOptions so;
  so.SetIntraOpNumThreads(1);
  so.SetInterOpNumThreads(1);
  so.SetGraphOptimizationLevel(ORT_ENABLE_ALL);
  Ort::Session raw((*gantry::onnx::OrtRuntime::get())->env(), path.c_str(), so);
  Ort::AllocatorWithDefaultOptions alloc;
  std::vector<std::string> in_s, out_s;
  for (size_t i = 0; i < raw.GetInputCount(); ++i) in_s.push_back(raw.GetInputNameAllocated(i, alloc).get());
  for (size_t i = 0; i < raw.GetOutputCount(); ++i)
    out_s.push_back(raw.GetOutputNameAllocated(i, alloc).get());
  std::vector<const char*> in_c, out_c;
  for (auto& s : in_s) in_c.push_back(s.c_str());
  for (auto& s : out_s) out_c.push_back(s.c_str());
  auto mem = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
  Ort::RunOptions run_options{nullptr};

  auto raw_once = [&] {
    std::vector<Ort::Value> values;
    values.reserve(inputs.size());
    for (const auto& t : inputs) {
      const auto& d = t.tensor.shape().dims();
      values.push_back(Ort::Value::CreateTensor(mem, const_cast<void*>(t.tensor.data()), t.tensor.byte_size(),
                                                d.data(), d.size(), ort_type(t.tensor.dtype())));
    }
    auto out = raw.Run(run_options, in_c.data(), values.data(), values.size(), out_c.data(), out_c.size());
    return out.size();
  };
  auto gantry_once = [&] {
    auto out = (*model)->infer_one(inputs);
    if (!out.ok()) {
      std::fprintf(stderr, "%s: %s\n", name, out.status().to_string().c_str());
      std::exit(1);
    }
    return out->size();
  };
  for (int i = 0; i < block; ++i) {  // warm both
    raw_once();
    gantry_once();
  }
  std::vector<double> raw_ns, gantry_ns;
  // This thread's CPU time: with one intra-op thread both sides compute on this thread, and time spent
  // descheduled on a shared machine would only be noise.
  auto time_block = [&](auto&& once) {
    const double t0 = thread_cpu_ns();
    for (int i = 0; i < block; ++i) once();
    return (thread_cpu_ns() - t0) / block;
  };
  for (int r = 0; r < rounds; ++r) {  // alternate which side goes first
    if (r % 2 == 0) {
      raw_ns.push_back(time_block(raw_once));
      gantry_ns.push_back(time_block(gantry_once));
    } else {
      gantry_ns.push_back(time_block(gantry_once));
      raw_ns.push_back(time_block(raw_once));
    }
  }
  const double g = median(gantry_ns), w = median(raw_ns);
  std::printf("%s: gantry %.3f us, raw %.3f us per call (thread CPU time, median of %d blocks of %d)\n", name,
              g / 1000, w / 1000, rounds, block);
  std::printf("BENCH onnx-overhead-%s ratio=%.3f\n", name, g / w);
  std::fflush(stdout);
  return true;
}

// The same model through Gantry twice: sessions allocating from Gantry's BlockPool (registered as the
// env's CPU allocator) vs ORT's own arena; same thread count, alternating blocks.
bool bench_pool_overhead(const char* name, const fs::path& path, const std::vector<NamedTensor>& inputs,
                         int block, int rounds) {
  if (!fs::exists(path)) {
    std::fprintf(stderr, "skipping %s: %s is missing (run make setup)\n", name, path.c_str());
    return false;
  }
  gantry::memory::BlockPool pool(gantry::memory::make_host_backing());
  if (auto s = (*gantry::onnx::OrtRuntime::get())->use_pool(&pool); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", name, s.to_string().c_str());
    return false;
  }
  gantry::backend::Placement p;
  p.intra_op_threads = 1;
  p.inter_op_threads = 1;
  gantry::onnx::OnnxModelOptions pooled_options;
  pooled_options.use_env_allocators = true;
  auto arena = gantry::onnx::OnnxModel::open(path, p);
  auto pooled = gantry::onnx::OnnxModel::open(path, p, "pooled", pooled_options);
  if (!arena.ok() || !pooled.ok()) {
    std::fprintf(stderr, "%s: %s %s\n", name, arena.status().to_string().c_str(),
                 pooled.status().to_string().c_str());
    return false;
  }
  auto once = [&](gantry::onnx::OnnxModel& m) {
    auto out = m.infer_one(inputs);
    if (!out.ok()) {
      std::fprintf(stderr, "%s: %s\n", name, out.status().to_string().c_str());
      std::exit(1);
    }
  };
  // This thread's CPU time (one intra-op thread: Run computes on the caller's thread), so that time
  // spent descheduled on a shared machine is not counted against either side.
  auto time_block = [&](gantry::onnx::OnnxModel& m) {
    const double t0 = thread_cpu_ns();
    for (int i = 0; i < block; ++i) once(m);
    return (thread_cpu_ns() - t0) / block;
  };
  time_block(**arena);
  time_block(**pooled);
  std::vector<double> a_ns, p_ns;
  for (int r = 0; r < rounds; ++r) {
    if (r % 2 == 0) {
      a_ns.push_back(time_block(**arena));
      p_ns.push_back(time_block(**pooled));
    } else {
      p_ns.push_back(time_block(**pooled));
      a_ns.push_back(time_block(**arena));
    }
  }
  const double pm = median(p_ns), am = median(a_ns);
  const auto st = pool.stats();
  std::printf(
      "%s: pool %.3f ms, arena %.3f ms per Run (thread CPU time, median of %d blocks of %d); pool peak %.1f "
      "MiB, %llu "
      "allocations\n",
      name, pm / 1e6, am / 1e6, rounds, block, static_cast<double>(st.peak_in_use) / (1 << 20),
      static_cast<unsigned long long>(st.total_allocations));
  std::printf("BENCH onnx-pool-allocator-overhead ratio=%.3f\n", pm / am);
  std::fflush(stdout);
  arena->reset();
  pooled->reset();
  (*gantry::onnx::OrtRuntime::get())->release_pool(&pool);
  return true;
}

// `bucket`: a session bucket (the input-shape profile the measured policy times with). False when a
// measurement failed; true also when the model cannot be timed by the measured policy (then no BENCH line).
bool bench_measured_policy(const char* name, const fs::path& path,
                           const gantry::model::SessionBucket& bucket) {
  if (!fs::exists(path)) {
    std::fprintf(stderr, "%s: %s missing: run make setup\n", name, path.c_str());
    return false;
  }
  const fs::path dir = fs::temp_directory_path() / ("gantry-bench-verdicts-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  // A package holding the model and a manifest with the profile.
  const fs::path pkg_dir = dir / "package";
  fs::create_directories(pkg_dir);
  fs::copy_file(path, pkg_dir / path.filename());
  auto manifest = gantry::model::synthesize_manifest(pkg_dir / path.filename());
  if (!manifest.ok()) {
    std::fprintf(stderr, "%s: %s\n", name, manifest.status().to_string().c_str());
    return false;
  }
  if (!bucket.empty()) manifest->onnx.session_buckets.push_back(bucket);
  if (!gantry::model::write_manifest(pkg_dir / "gantry.json", *manifest).ok()) return false;
  gantry::onnx::OnnxBackend backend;
  auto pkg = gantry::model::load_package(pkg_dir);
  if (!pkg.ok()) {
    std::fprintf(stderr, "%s: %s\n", name, pkg.status().to_string().c_str());
    return false;
  }
  const auto machine = gantry::backend::local_machine();
  auto ms = [](clock_type::time_point a, clock_type::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  constexpr int kRounds = 3;
  std::vector<double> first_ms, cached_ms, load_ms;
  bool timed = true, cached = true;
  std::string chosen;
  for (int round = 0; round < kRounds; ++round) {
    // A fresh verdict cache each round: its first load measures, its second comes from the cache.
    gantry::backend::VerdictCache cache((dir / ("cache-" + std::to_string(round))).string());
    gantry::backend::LoadOptions options;
    options.policy = gantry::backend::ProviderPolicy::kMeasured;
    options.cache = &cache;
    options.measure_single = true;  // this machine has one viable provider: time it anyway
    options.intra_op_threads = 1;
    // The reference: the model loaded on the CPU provider with one thread (the placement the measured policy
    // times); before the choices in odd rounds, after them in even ones.
    gantry::backend::Placement placement;
    placement.intra_op_threads = 1;
    bool loaded = true;
    auto load_model = [&] {
      const auto t = clock_type::now();
      auto m = backend.load(*pkg, placement);
      load_ms.push_back(ms(t, clock_type::now()));
      loaded = loaded && m.ok();
    };
    if (round % 2 == 1) load_model();
    auto t0 = clock_type::now();
    auto first = gantry::backend::choose_provider(backend, *pkg, machine, options);
    auto t1 = clock_type::now();
    auto second = gantry::backend::choose_provider(backend, *pkg, machine, options);
    auto t2 = clock_type::now();
    first_ms.push_back(ms(t0, t1));
    cached_ms.push_back(ms(t1, t2));
    if (round % 2 == 0) load_model();
    if (!loaded) {
      std::fprintf(stderr, "%s: loading the model (the reference) failed\n", name);
      fs::remove_all(dir);
      return false;
    }
    const auto* v = first.chosen_verdict();
    if (!v) {
      std::fprintf(stderr, "%s measured policy found no viable candidate:\n%s", name,
                   first.explain().c_str());
      fs::remove_all(dir);
      return false;
    }
    chosen = v->provider;
    timed = timed && v->median_us.has_value();
    cached = cached && second.chosen_verdict() && second.chosen_verdict()->from_cache;
    // A model the synthesised inputs cannot run (zeros: silero's sample rate 0 takes a branch that fails)
    // loads unmeasured in policy order; its load times would not be the measured policy's: no BENCH line.
    if (!timed) {
      std::printf("%s measured policy: not timed (%s); no BENCH line\n", name, v->reason.c_str());
      fs::remove_all(dir);
      return true;
    }
  }
  fs::remove_all(dir);
  if (!cached) {
    std::fprintf(stderr, "%s measured policy: the second load did not come from the cache\n", name);
    return false;
  }
  const double first = gantry::bench::median(first_ms), again = gantry::bench::median(cached_ms),
               ref = gantry::bench::median(load_ms);
  std::printf(
      "%s measured policy: chose %s; its choice took %.2f ms on a first load, %.3f ms from the cache; "
      "the model's load %.2f ms\n",
      name, chosen.c_str(), first, again, ref);
  std::printf("BENCH measured-policy-first-load-%s ratio=%.3f ms=%.2f\n", name, first / ref, first);
  std::printf("BENCH measured-policy-cached-load-%s ratio=%.3f ms=%.3f\n", name, again / ref, again);
  return true;
}

}  // namespace

int main() {
  const fs::path mlp = kModels / "mlp_64_128_10.onnx";
  const fs::path silero = kModels / "silero_vad_v5.onnx";
  int status = 0;
  if (!bench_case("mlp-b1", mlp, {{"input", random_tensor(DType::kFloat32, Shape({1, 64}), 1)}}, 2000, 41))
    status = 1;
  if (!bench_case("mlp-b32", mlp, {{"input", random_tensor(DType::kFloat32, Shape({32, 64}), 2)}}, 100, 101))
    status = 1;
  std::vector<NamedTensor> vad = {
      {"input", random_tensor(DType::kFloat32, Shape({1, 512}), 3)},
      {"state", random_tensor(DType::kFloat32, Shape({2, 1, 128}), 4)},
      {"sr", Tensor::from_values<int64_t>(DType::kInt64, Shape(), {16000}).value()}};
  if (!bench_case("silero", silero, vad, 20, 101)) status = 1;
  const fs::path det = kModels / "paddleocr" / "ch_PP-OCRv4_det_infer.onnx";
  if (!bench_pool_overhead("paddleocr-det", det,
                           {{"x", random_tensor(DType::kFloat32, Shape({1, 3, 160, 160}), 5)}}, 3, 31))
    status = 1;
  if (!bench_measured_policy("mlp", mlp, {{"input", Shape({1, 64})}})) status = 1;
  if (!bench_measured_policy("silero", silero, {{"input", Shape({1, 512})}, {"state", Shape({2, 1, 128})}}))
    status = 1;
  return status;
}
