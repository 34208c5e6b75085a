// Checkpoint planner accuracy: the plan made from a Hugging Face checkpoint's config.json and safetensors
// headers alone vs llama.cpp's own allocations (gantry::llama::measure_memory) for the GGUF it made of that
// checkpoint (converted, then quantised by llama_model_quantize), for every generated architecture
// (scripts/models/hf_checkpoints.py) at every quantisation, at ctx 512 and 4096, component by component:
// weights, KV cache, compute and output buffers. Prints
// `BENCH plan-checkpoint-error ratio=<max |predicted - measured| / measured over every component>`
// (goal: <= 0.01), and per architecture the worst component.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include "../tests/checkpoint/checkpoint_files.h"
#include "gantry/plan/checkpoint.h"
#include "gantry/plan/planner.h"

namespace {

double rel(uint64_t pred, uint64_t meas) {
  if (meas == 0) return pred == 0 ? 0 : 1;
  return std::fabs(static_cast<double>(pred) - static_cast<double>(meas)) / static_cast<double>(meas);
}

}  // namespace

int main() {
  using namespace gantry::plan;
  namespace t = gantry::plan::testing;
  double worst = 0;
  std::string worst_at;
  int cases = 0;
  std::printf("%-9s %-7s %5s %9s %9s %9s %9s   (relative error per component: weights kv compute output)\n",
              "arch", "quant", "ctx", "weights", "kv", "compute", "output");
  for (const char* arch : t::kArchitectures) {
    auto ck = t::read_checkpoint(arch);
    if (!ck.ok()) {
      std::fprintf(stderr, "plan_checkpoint_error_bench: %s (run make setup)\n",
                   ck.status().to_string().c_str());
      return 1;
    }
    auto conv = convert_checkpoint(ck->config_json, ck->tensors);
    if (!conv.ok()) {
      std::fprintf(stderr, "plan_checkpoint_error_bench: %s: %s\n", arch, conv.status().to_string().c_str());
      return 1;
    }
    double arch_worst = 0;
    for (const char* q : t::kQuantisations) {
      auto profile = profile_checkpoint(*conv, *file_type_by_name(q), arch);
      if (!profile.ok()) return 1;
      for (uint32_t ctx : {512u, 4096u}) {
        auto m = t::measure(arch, q, ctx);
        auto p = plan_gguf(*profile, t::cpu_plan_options(ctx), {t::big_cpu()});
        if (!m.ok() || !p.ok()) {
          std::fprintf(stderr, "plan_checkpoint_error_bench: %s %s: %s\n", arch, q,
                       (!m.ok() ? m.status() : p.status()).to_string().c_str());
          return 1;
        }
        const double e[4] = {rel(p->totals.weights, m->model_bytes), rel(p->totals.kv_cache, m->kv_bytes),
                             rel(p->totals.compute, m->compute_bytes),
                             rel(p->totals.output, m->output_bytes)};
        const double here = *std::max_element(e, e + 4);
        if (here > worst) {
          worst = here;
          worst_at = fmt::format("{} {} ctx {}", arch, q, ctx);
        }
        arch_worst = std::max(arch_worst, here);
        ++cases;
        if (ctx == 4096 && (std::string(q) == "bf16" || std::string(q) == "q4_k_m" || here > 0.01)) {
          std::printf("%-9s %-7s %5u %8.3f%% %8.3f%% %8.3f%% %8.3f%%\n", arch, q, ctx, 100 * e[0], 100 * e[1],
                      100 * e[2], 100 * e[3]);
        }
      }
    }
    std::printf("%-9s worst component error %.3f%%\n", arch, 100 * arch_worst);
  }
  std::printf("cases %d (architectures x quantisations x contexts); worst %.3f%% (%s)\n", cases, 100 * worst,
              worst_at.empty() ? "every component exact" : worst_at.c_str());
  std::printf("BENCH plan-checkpoint-error ratio=%.6f\n", worst);
  return 0;
}
