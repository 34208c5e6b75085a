// ONNX Runtime's CUDA EP allocating from Gantry's per-device pool (the Runtime's default) against ORT's own
// arena (RuntimeOptions::memory_pool false), on the heavy MLP (or the small one), one GPU. Prints
//   onnx-cuda-pool: outputs equal: yes|NO
//   onnx-cuda-pool: charged <bytes> used <bytes> (ratio r)   (goal: within 1 %)
//   BENCH onnx-cuda-pool-overhead ratio=<median latency with the pool / with ORT's arena>   (goal <= 1.02)
// "charged" is what the model's memory ledger on cuda:0 holds (the pool's charges), "used" what the pool
// took from the driver for it (its mapped blocks). Without a CUDA EP or GPU it says why and exits 0:
// scripts/gpu-check.sh runs it where a GPU is lent.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "bench_timing.h"
#include "gantry/backend/onnx/providers.h"
#include "gantry/memory/block_pool.h"
#include "gantry/runtime/runtime.h"

namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;
using gantry::bench::median;

fs::path model_path() {
  const fs::path models = fs::path(GANTRY_DEPS_DIR) / "models";
  if (const char* m = std::getenv("GANTRY_BENCH_MODEL"); m && *m) return m;
  return fs::exists(models / "heavy_mlp_1024.onnx") ? models / "heavy_mlp_1024.onnx"
                                                    : models / "mlp_64_128_10.onnx";
}

struct Side {
  std::unique_ptr<gantry::runtime::Runtime> rt;
  gantry::runtime::ModelHandle h;
};

gantry::Result<Side> load(bool pool, const fs::path& model) {
  gantry::runtime::RuntimeOptions ro;
  ro.verdict_cache_dir = "none";
  ro.keep_alive_timer = false;
  ro.memory_pool = pool;
  Side s;
  GANTRY_ASSIGN_OR_RETURN(s.rt, gantry::runtime::Runtime::create(std::move(ro)));
  gantry::runtime::LoadOptions lo;
  lo.name = pool ? "pooled" : "arena";
  lo.factory.provider = "cuda";
  GANTRY_ASSIGN_OR_RETURN(s.h, s.rt->load(model.string(), lo));
  return s;
}

std::vector<gantry::NamedTensor> inputs(const gantry::backend::ModelMetadata& md) {
  std::vector<gantry::NamedTensor> in;
  for (const auto& t : md.inputs) {
    std::vector<int64_t> dims = t.shape.dims();
    for (auto& d : dims)
      if (d < 0) d = 4;
    auto x = gantry::Tensor::allocate(t.dtype, gantry::Shape(dims)).value();
    if (t.dtype == gantry::DType::kFloat32) {
      auto v = x.values<float>();
      for (size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * static_cast<float>(i % 97) - 0.3f;
    }
    in.push_back({t.name, std::move(x)});
  }
  return in;
}

double run_ms(gantry::runtime::ModelHandle& h, const std::vector<gantry::NamedTensor>& in, int n) {
  const auto t0 = clock_type::now();
  for (int i = 0; i < n; ++i) (void)h->infer_one(in);
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count() / n;
}

}  // namespace

int main() {
  auto cuda = gantry::onnx::provider_available("cuda");
  if (!cuda.ok) {
    std::printf("onnx-cuda-pool: skipped: no CUDA EP here (%s)\n", cuda.reason.c_str());
    return 0;
  }
  const fs::path model = model_path();
  auto arena = load(false, model);  // first: the CUDA context exists before the pooled side is measured
  if (!arena.ok()) {
    std::printf("onnx-cuda-pool: skipped: %s\n", arena.status().message().c_str());
    return 0;
  }
  auto pooled = load(true, model);
  if (!pooled.ok()) {
    std::fprintf(stderr, "onnx-cuda-pool: the pooled load failed: %s\n", pooled.status().message().c_str());
    return 1;
  }
  const auto in = inputs(arena->h->metadata());
  auto a = arena->h->infer_one(in);
  auto p = pooled->h->infer_one(in);
  if (!a.ok() || !p.ok()) {
    std::fprintf(stderr, "onnx-cuda-pool: inference failed: %s %s\n", a.status().message().c_str(),
                 p.status().message().c_str());
    return 1;
  }
  bool equal = a->size() == p->size();
  for (size_t i = 0; equal && i < a->size(); ++i)
    equal = (*a)[i].tensor.byte_size() == (*p)[i].tensor.byte_size() &&
            std::memcmp((*a)[i].tensor.data(), (*p)[i].tensor.data(), (*a)[i].tensor.byte_size()) == 0;
  std::printf("onnx-cuda-pool: outputs equal: %s\n", equal ? "yes" : "NO");

  gantry::memory::BlockPool* pool = pooled->rt->pool("cuda:0");
  uint64_t charged = 0;
  for (const auto& b : pooled->rt->budgets())
    if (b.device == "cuda:0")
      for (const auto& o : b.owners)
        if (o.owner == "pooled") charged = o.in_use;
  const uint64_t used = pool ? pool->stats().bytes_reserved : 0;
  std::printf("onnx-cuda-pool: charged %llu used %llu (ratio %.4f; goal within 1 %%; pool in use %llu)\n",
              static_cast<unsigned long long>(charged), static_cast<unsigned long long>(used),
              used ? static_cast<double>(charged) / static_cast<double>(used) : 0.0,
              static_cast<unsigned long long>(pool ? pool->stats().bytes_in_use : 0));

  for (int i = 0; i < 5; ++i) {
    run_ms(arena->h, in, 2);
    run_ms(pooled->h, in, 2);
  }
  std::vector<double> with_pool, with_arena;
  for (int r = 0; r < 15; ++r) {
    with_arena.push_back(run_ms(arena->h, in, 10));
    with_pool.push_back(run_ms(pooled->h, in, 10));
  }
  std::printf("BENCH onnx-cuda-pool-overhead ratio=%.3f\n", median(with_pool) / median(with_arena));
  std::printf("onnx-cuda-pool: %s, median %.3f ms with the pool, %.3f ms with ORT's arena\n",
              model.filename().c_str(), median(with_pool), median(with_arena));
  return equal ? 0 : 1;
}
