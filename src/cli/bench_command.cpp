// gantry bench MODEL.gguf: prompt (pp) and generation (tg) tokens/s, measured as llama-bench does, on a
// model loaded through the Runtime.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/commands.h"
#include "cli/run_gguf.h"
#include "gantry/core/kv_type.h"
#include "gantry/runtime/runtime.h"

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
  std::optional<int> n_gpu_layers;
  std::vector<std::string> rpc;
  std::string kv_type = "f16";
  bool json = false;
  bool threadpool = true;
  bool no_mmap = false;
};

// The model is loaded through the Runtime like any other (provider, placement and memory budget), then
// measured through the generic Model contract; the benchmark's contexts are its own (n_prompt + n_gen
// cells per test, as llama-bench).
int run_bench(const BenchArgs& a) {
  auto usage = [](const std::string& m) {
    std::cerr << "gantry bench: error: " << m << "\n";
    return 2;
  };
  if (a.n_prompt < 0 || a.n_gen < 0 || (a.n_prompt == 0 && a.n_gen == 0))
    return usage("-p and -n must be >= 0, not both 0");
  if (a.reps < 1) return usage("-r must be >= 1");
  if (a.threads < 0) return usage("-t must be >= 0");
  const auto kv_type = parse_kv_type(a.kv_type);
  if (!kv_type) return usage("unknown --kv-type " + a.kv_type + " (" + std::string(kv_type_names()) + ")");
  runtime::RuntimeOptions ro;
  ro.keep_alive_timer = false;
  auto rt = runtime::Runtime::create(std::move(ro));
  if (!rt.ok()) {
    std::cerr << "gantry bench: error: " << rt.status().message() << "\n";
    return 1;
  }
  runtime::LoadOptions lo;
  // With RPC servers the offload goes to their devices (provider cpu; the planner splits the layers unless
  // --n-gpu-layers says); without, --n-gpu-layers other than 0 means local GPUs.
  lo.factory.provider = a.rpc.empty() && a.n_gpu_layers.value_or(0) != 0 ? "cuda" : "cpu";
  lo.factory.intra_op_threads = a.threads;
  model::LlamaOptions& llama = lo.factory.llama;
  llama.n_gpu_layers = a.rpc.empty() ? std::optional<int>(a.n_gpu_layers.value_or(0)) : a.n_gpu_layers;
  if (!a.rpc.empty()) {
    if (Status s = rpc_option(llama, a.rpc); !s.ok()) return usage("--rpc: " + s.message());
  }
  llama.kv_type = *kv_type;
  if (a.no_mmap) llama.mmap = false;
  llama.n_ctx = 256;  // the model's own generation context stays small: the tests make theirs
  llama.parallel = 1;
  auto handle = (*rt)->load(a.model, lo);
  if (!handle.ok()) {
    std::cerr << "gantry bench: error: " << handle.status().message() << "\n";
    return handle.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  backend::ThroughputOptions to;
  to.n_prompt = a.n_prompt;
  to.n_gen = a.n_gen;
  to.threads = a.threads;
  to.reps = a.reps;
  to.n_batch = a.n_batch;
  to.n_ubatch = a.n_ubatch;
  to.threadpool = a.threadpool;
  auto results = (*handle)->measure_throughput(to);
  if (!results.ok()) {
    std::cerr << "gantry bench: error: " << results.status().message() << "\n";
    return results.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  const auto& meta = (*handle)->metadata();
  auto property = [&](const char* key) {
    auto it = meta.properties.find(key);
    return it == meta.properties.end() ? std::string() : it->second;
  };
  auto number = [&](const char* key) -> uint64_t {
    const std::string v = property(key);
    return v.empty() ? 0 : std::stoull(v);
  };
  backend::Backend* be = (*rt)->backends().find(meta.backend);
  const int threads = a.threads > 0 ? a.threads : static_cast<int>(std::thread::hardware_concurrency());
  if (a.json) {
    nlohmann::json j;
    j["model"] = a.model;
    j["model_desc"] = property("description");
    j["model_size"] = number("size_bytes");
    j["n_params"] = number("n_params");
    j["llama_version"] = be ? be->version() : std::string();
    j["provider"] = meta.provider;
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
    std::cout << "model: " << a.model << " (" << property("description") << ") on " << meta.provider
              << ", threads: " << threads << "\n";
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
  cmd->add_option("--rpc", args->rpc,
                  "Spread the model over these RPC servers too (HOST:PORT,...: `gantry rpc-server`)");
  cmd->add_option(
      "--n-gpu-layers,--ngl", args->n_gpu_layers,
      "Layers to offload to GPUs (or RPC devices); -1 = all (default 0; with --rpc: the planner's "
      "split)");
  cmd->add_option("--kv-type", args->kv_type, "KV cache type: f16, q8_0, q4_0, ...")->capture_default_str();
  cmd->add_option("--threadpool", args->threadpool, "Attach a polling ggml threadpool (as llama-bench does)")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "Print the results as JSON");
  cmd->add_flag("--no-mmap", args->no_mmap, "Read the weights into memory instead of mapping the file");
  cmd->callback([args, &exit_code] { exit_code = run_bench(*args); });
}

}  // namespace gantry::cli
