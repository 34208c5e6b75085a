// gantry bench MODEL.gguf: prompt (pp) and generation (tg) tokens/s, measured as llama-bench does, on a
// model loaded through the Runtime.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/commands.h"
#include "cli/llama_flags.h"
#include "gantry/core/kv_type.h"
#include "gantry/runtime/runtime.h"

namespace gantry::cli {
namespace {

struct BenchArgs {
  std::string model;
  int n_prompt = 512;
  int n_gen = 128;
  int reps = 5;
  LlamaFlags llama;  // the llama.cpp flags shared with the other commands (kBenchLlamaFlags)
  bool json = false;
  bool threadpool = true;
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
  const int n_threads = a.llama.threads;
  if (n_threads < 0) return usage("-t must be >= 0");
  const std::string kv_name = a.llama.kv_type.empty() ? "f16" : a.llama.kv_type;
  if (!parse_kv_type(kv_name))
    return usage("unknown --kv-type " + kv_name + " (" + std::string(kv_type_names()) + ")");
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
  const bool rpc = !a.llama.rpc.empty();
  lo.factory.provider = !rpc && a.llama.gpu_layers.value_or(0) != 0 ? "cuda" : "cpu";
  lo.factory.intra_op_threads = n_threads;
  model::LlamaOptions& llama = lo.factory.llama;
  // The batch sizes are the benchmark's (ThroughputOptions), not the model's generation context's.
  if (Status s = apply(a.llama, llama, kBenchLlamaFlags & ~(kLlamaBatch | kLlamaUbatch)); !s.ok())
    return usage(s.message());
  if (!rpc) llama.n_gpu_layers = a.llama.gpu_layers.value_or(0);
  if (!llama.kv_type) llama.kv_type = KvType::kF16;
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
  to.threads = n_threads;
  to.reps = a.reps;
  to.n_batch = a.llama.batch.value_or(to.n_batch);
  to.n_ubatch = a.llama.ubatch.value_or(to.n_ubatch);
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
  const int threads = n_threads > 0 ? n_threads : static_cast<int>(std::thread::hardware_concurrency());
  if (a.json) {
    nlohmann::json j;
    j["model"] = a.model;
    j["model_desc"] = property("description");
    j["model_size"] = number("size_bytes");
    j["n_params"] = number("n_params");
    j["llama_version"] = be ? be->version() : std::string();
    j["provider"] = meta.provider;
    j["n_threads"] = threads;
    j["n_batch"] = to.n_batch;
    j["n_ubatch"] = to.n_ubatch;
    j["type_kv"] = kv_name;
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
  cmd->add_option("-r,--reps", args->reps, "Timed repetitions per test")->capture_default_str();
  add_llama_flags(*cmd, args->llama, kBenchLlamaFlags);
  note_default(*cmd, "--threads", "all");
  note_default(*cmd, "--batch-size", "2048");
  note_default(*cmd, "--ubatch-size", "512");
  note_default(*cmd, "--kv-type", "f16");
  note_default(*cmd, "--n-gpu-layers", "0; with --rpc: the planner's split");
  cmd->add_option("--threadpool", args->threadpool, "Attach a polling ggml threadpool (as llama-bench does)")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "Print the results as JSON");
  cmd->callback([args, &exit_code] { exit_code = run_bench(*args); });
}

}  // namespace gantry::cli
