// llama.cpp CPU weights from Gantry's BlockPool vs llama.cpp's own CPU buffers, mmap off, on the f16 tiny
// model (the case where the runtime routes weights through the pool): load time and token generation,
// alternating in the same run. Prints BENCH llama-pool-weights-load ratio= (pool / own, median load time) and
// BENCH llama-pool-weights-tg ratio= (pool / own, median time per generated token); goal <= 1.02 each.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "gantry/backend/llama/llama_backend.h"
#include "gantry/memory/backing.h"
#include "gantry/memory/block_pool.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  const std::string path = std::string(GANTRY_DEPS_DIR) + "/models/tiny-llama.gguf";
  if (!std::filesystem::exists(path)) {
    std::fprintf(stderr, "llama_pool_weights_bench: %s is missing (run make setup)\n", path.c_str());
    return 1;
  }
  gantry::memory::BlockPool pool(gantry::memory::make_host_backing());
  gantry::llama::LlamaBackend pooled(&pool), own;
  gantry::backend::Placement p;
  p.provider = "cpu";
  p.intra_op_threads = 1;
  p.model_name = "bench";
  p.llama.n_ctx = 512;
  p.llama.mmap = false;
  gantry::backend::ThroughputOptions t;
  t.n_prompt = 0;
  t.n_gen = 64;
  t.reps = 3;
  t.threads = 1;
  std::vector<double> load_pool, load_own, tg_pool, tg_own;
  for (int round = 0; round < 8; ++round) {
    for (int side = 0; side < 2; ++side) {
      const bool use_pool = (round + side) % 2 == 0;  // alternate which goes first
      auto t0 = Clock::now();
      auto m = (use_pool ? pooled : own).load_file(path, p);
      auto t1 = Clock::now();
      if (!m.ok()) {
        std::fprintf(stderr, "llama_pool_weights_bench: %s\n", m.status().to_string().c_str());
        return 1;
      }
      if (use_pool && pool.stats().bytes_in_use == 0) {
        std::fprintf(stderr, "llama_pool_weights_bench: the weights did not come from the pool\n");
        return 1;
      }
      auto r = (*m)->measure_throughput(t);
      if (!r.ok() || r->empty()) {
        std::fprintf(stderr, "llama_pool_weights_bench: %s\n", r.status().to_string().c_str());
        return 1;
      }
      (use_pool ? load_pool : load_own).push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      (use_pool ? tg_pool : tg_own).push_back(1000.0 / r->back().avg_ts);  // ms per token
    }
  }
  const double lp = median(load_pool), lo = median(load_own), tp = median(tg_pool), to = median(tg_own);
  std::printf(
      "llama-pool-weights: load %.2f ms (pool) vs %.2f ms (own); tg %.4f ms/token (pool) vs %.4f (own)\n", lp,
      lo, tp, to);
  std::printf("BENCH llama-pool-weights-load ratio=%.3f\n", lp / lo);
  std::printf("BENCH llama-pool-weights-tg ratio=%.3f\n", tp / to);
  return 0;
}
