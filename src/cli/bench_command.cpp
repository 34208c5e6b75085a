// gantry bench MODEL.gguf: prompt (pp) and generation (tg) tokens/s, measured as llama-bench does.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/commands.h"
#include "gantry/backend/llama/llama_info.h"
#include "gantry/backend/llama/settings.h"
#include "gantry/backend/llama/speed.h"

namespace gantry::cli {
namespace {

struct BenchArgs {
  std::string model;
  int n_prompt = 512;
  int n_gen = 128;
  int threads = 0;
  int reps = 5;
  uint32_t n_batch = 2048;
  uint32_t n_ubatch = 512;
  int n_gpu_layers = 0;
  std::string kv_type = "f16";
  bool json = false;
  bool threadpool = true;
};

int run_bench(const BenchArgs& a) {
  using namespace gantry::llama;
  auto usage = [](const std::string& m) {
    std::cerr << "gantry bench: error: " << m << "\n";
    return 2;
  };
  if (a.n_prompt < 0 || a.n_gen < 0 || a.n_prompt + a.n_gen == 0)
    return usage("-p and -n must be >= 0, not both 0");
  if (a.reps < 1) return usage("-r must be >= 1");
  if (a.threads < 0) return usage("-t must be >= 0");
  const auto kv = plan::parse_kv_type(a.kv_type);
  if (!kv) return usage("unknown --kv-type " + a.kv_type + " (" + std::string(plan::kv_type_names()) + ")");
  // Weights placed by the same translation every GGUF load uses (gantry/backend/llama/settings.h);
  // the contexts are the benchmark's own (n_prompt + n_gen cells per test, as llama-bench).
  backend::Placement placement;
  placement.provider = a.n_gpu_layers != 0 ? "cuda" : "cpu";
  if (a.n_gpu_layers != 0) placement.options["n_gpu_layers"] = std::to_string(a.n_gpu_layers);
  auto settings = llama_settings(placement, a.model);
  if (!settings.ok()) {
    std::cerr << "gantry bench: error: " << settings.status().message() << "\n";
    return settings.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  auto weights = LlamaWeights::load(a.model, settings->load);
  if (!weights.ok()) {
    std::cerr << "gantry bench: error: " << weights.status().message() << "\n";
    return 1;
  }
  SpeedOptions so;
  so.n_prompt = a.n_prompt;
  so.n_gen = a.n_gen;
  so.n_threads = a.threads;
  so.reps = a.reps;
  so.n_batch = a.n_batch;
  so.n_ubatch = a.n_ubatch;
  so.kv_type = *kv;
  so.threadpool = a.threadpool;
  auto results = measure_speed(*weights, so);
  if (!results.ok()) {
    std::cerr << "gantry bench: error: " << results.status().message() << "\n";
    return results.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  const int threads = a.threads > 0 ? a.threads : static_cast<int>(std::thread::hardware_concurrency());
  if (a.json) {
    nlohmann::json j;
    j["model"] = a.model;
    j["model_desc"] = (*weights)->description();
    j["model_size"] = (*weights)->size_bytes();
    j["n_params"] = (*weights)->n_params();
    j["llama_version"] = llama_version();
    j["n_threads"] = threads;
    j["n_batch"] = a.n_batch;
    j["n_ubatch"] = a.n_ubatch;
    j["type_kv"] = a.kv_type;
    j["reps"] = a.reps;
    j["results"] = nlohmann::json::array();
    for (const auto& r : *results) {
      j["results"].push_back({{"test", r.test},
                              {"n_prompt", r.n_prompt},
                              {"n_gen", r.n_gen},
                              {"avg_ts", r.avg_ts},
                              {"stddev_ts", r.stddev_ts},
                              {"samples_ts", r.samples_ts}});
    }
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "model: " << a.model << " (" << (*weights)->description() << "), threads: " << threads
              << "\n";
    for (const auto& r : *results) {
      char line[128];
      std::snprintf(line, sizeof line, "%-8s %10.2f ± %.2f t/s", r.test.c_str(), r.avg_ts, r.stddev_ts);
      std::cout << line << "\n";
    }
  }
  return 0;
}

}  // namespace

void register_bench_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "Measure prompt (pp) and generation (tg) tokens/s of a GGUF model");
  cmd->add_option("model", args->model, "GGUF model file")->required();
  cmd->add_option("-p,--n-prompt", args->n_prompt, "Prompt tokens (pp test); 0 = skip")
      ->capture_default_str();
  cmd->add_option("-n,--n-gen", args->n_gen, "Generated tokens (tg test); 0 = skip")->capture_default_str();
  cmd->add_option("-t,--threads", args->threads, "CPU threads; 0 = all")->capture_default_str();
  cmd->add_option("-r,--reps", args->reps, "Timed repetitions per test")->capture_default_str();
  cmd->add_option("-b,--batch-size", args->n_batch, "Logical batch size")->capture_default_str();
  cmd->add_option("--ubatch-size", args->n_ubatch, "Physical batch size")->capture_default_str();
  cmd->add_option("--n-gpu-layers,--ngl", args->n_gpu_layers, "Layers to offload to GPUs; -1 = all")
      ->capture_default_str();
  cmd->add_option("--kv-type", args->kv_type, "KV cache type: f16, q8_0, q4_0, ...")->capture_default_str();
  cmd->add_option("--threadpool", args->threadpool, "Attach a polling ggml threadpool (as llama-bench does)")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "Print the results as JSON");
  cmd->callback([args, &exit_code] { exit_code = run_bench(*args); });
}

}  // namespace gantry::cli
