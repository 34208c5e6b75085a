// Planner accuracy: gantry's predicted bytes vs what llama.cpp actually allocates (model, KV, compute and
// output buffers, read by gantry::llama::measure_memory) at ctx 512, 2048 and 8192 on the generated models,
// next to the error of Ollama's published estimate (file size + 2 * layers * kv_heads * head_dim * ctx * 2
// bytes). Prints `BENCH gguf-plan-error ratio=<max |predicted - measured| / measured>` (goal: <= 0.05).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "gantry/backend/llama/measure.h"
#include "gantry/plan/gguf_profile.h"
#include "gantry/plan/planner.h"

namespace {

double rel(double pred, double meas) { return meas > 0 ? (pred - meas) / meas : 0; }

}  // namespace

int main() {
  const std::string dir = GANTRY_DEPS_DIR "/models/";
  const char* models[] = {"bench-100m-q8_0.gguf", "bench-100m-q4_0.gguf", "tiny-llama.gguf"};
  double worst = 0, worst_ollama = 0;
  int cases = 0;
  std::printf("%-30s %6s %12s %12s %8s %12s %8s   %s\n", "model", "ctx", "predicted", "measured", "error",
              "ollama", "error", "(pred/meas per part: weights kv compute output, MiB)");
  for (const char* name : models) {
    const std::string path = dir + name;
    if (!std::filesystem::exists(path)) {
      std::fprintf(stderr, "plan_error_bench: %s missing (run make setup)\n", path.c_str());
      return 1;
    }
    auto profile = gantry::plan::profile_from_gguf(std::filesystem::path(path));
    if (!profile.ok()) {
      std::fprintf(stderr, "plan_error_bench: %s\n", profile.status().to_string().c_str());
      return 1;
    }
    struct Case {
      uint32_t ctx;
      bool flash;
      uint32_t parallel;
      bool unified;
      gantry::KvType pkv;
      const char* label;
    };
    std::vector<Case> cases_here;
    for (uint32_t ctx : {512u, 2048u, 8192u}) {
      cases_here.push_back({ctx, true, 1, true, gantry::KvType::kF16, ""});
    }
    if (std::string(name) == "bench-100m-q8_0.gguf") {  // the other llama.cpp code paths, same model
      cases_here.push_back({8192, false, 1, true, gantry::KvType::kF16, " fa-off"});
      cases_here.push_back({8192, true, 4, false, gantry::KvType::kF16, " par4"});
      cases_here.push_back({8192, true, 1, true, gantry::KvType::kQ8_0, " kv-q8"});
    }
    for (const Case& c : cases_here) {
      const uint32_t ctx = c.ctx;
      gantry::backend::Placement placement;
      placement.provider = "cpu";
      placement.intra_op_threads = 1;
      gantry::model::LlamaOptions& llama = placement.llama;
      llama.n_ctx = static_cast<int>(ctx);
      llama.parallel = static_cast<int>(c.parallel);
      llama.kv_type = c.pkv;
      llama.flash_attn = c.flash;
      llama.n_batch = 512;
      llama.n_ubatch = 512;
      auto settings = gantry::llama::llama_settings(placement, path);
      if (!settings.ok()) {
        std::fprintf(stderr, "plan_error_bench: %s: %s\n", name, settings.status().to_string().c_str());
        return 1;
      }
      settings->context.kv_unified = c.unified;
      auto m = gantry::llama::measure_memory(path, *settings, /*warm_up=*/false);
      if (!m.ok()) {
        std::fprintf(stderr, "plan_error_bench: measuring %s: %s\n", name, m.status().to_string().c_str());
        return 1;
      }
      gantry::plan::PlanOptions po;
      po.n_ctx = ctx;
      po.n_parallel = c.parallel;
      po.kv_type = c.pkv;
      po.n_batch = 512;
      po.n_ubatch = 512;
      po.kv_unified = c.unified;
      po.flash_attn = c.flash;
      po.n_gpu_layers = 0;
      auto p = gantry::plan::plan_gguf(
          *profile, po, {gantry::plan::memory_target("cpu", "CPU", false, 1ull << 40, 1ull << 40)});
      if (!p.ok()) {
        std::fprintf(stderr, "plan_error_bench: planning %s: %s\n", name, p.status().to_string().c_str());
        return 1;
      }
      const auto& l0 = profile->layers[0];
      const double ollama = static_cast<double>(profile->file_bytes) +
                            2.0 * profile->n_layer() * l0.n_head_kv * l0.n_embd_head_k * ctx * 2.0;
      const double pred = static_cast<double>(p->totals.total());
      const double meas = static_cast<double>(m->total_bytes);
      const double e = rel(pred, meas), eo = rel(ollama, meas);
      worst = std::max(worst, std::fabs(e));
      worst_ollama = std::max(worst_ollama, std::fabs(eo));
      ++cases;
      const double mib = 1 << 20;
      const std::string label = std::string(name) + c.label;
      std::printf(
          "%-30s %6u %12.0f %12.0f %+7.2f%% %12.0f %+7.2f%%   %.2f/%.2f %.2f/%.2f %.2f/%.2f %.3f/%.3f\n",
          label.c_str(), ctx, pred, meas, 100 * e, ollama, 100 * eo, p->totals.weights / mib,
          m->model_bytes / mib, p->totals.kv_cache / mib, m->kv_bytes / mib, p->totals.compute / mib,
          m->compute_bytes / mib, p->totals.output / mib, m->output_bytes / mib);
    }
  }
  std::printf("cases %d: gantry max |error| %.2f%%, ollama estimate max |error| %.2f%%\n", cases, 100 * worst,
              100 * worst_ollama);
  std::printf("BENCH gguf-plan-error ratio=%.6f\n", worst);
  return 0;
}
