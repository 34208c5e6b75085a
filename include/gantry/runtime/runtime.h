// Runtime: THE composition root. It owns the hardware registry, the backends (ONNX Runtime, llama.cpp),
// one memory budget per device and the loaded models (ModelManager). CLI commands and the server use
// only this API; nothing above it constructs a backend.
//
//   auto rt = Runtime::create({});                         // detects the machine once
//   runtime::LoadOptions o;
//   o.factory.llama.n_ctx = 4096;
//   auto h = rt->load("model.gguf", o);                     // provider choice + budget + load
//   h->model().generate({...});                            // or infer_one / embed / format_chat
//
// load() resolves a .onnx, .gguf, package directory or .tar, picks the backend by format and the
// provider through the factory and the provider policy (every format alike, with reasons), lays out its
// instances by the manifest's strategy and instance count (runtime/instance_layout.h), asks the backend
// how much memory each instance will take on each device, reserves it in the budgets (evicting idle
// models if needed) and only then loads them. A model that cannot fit is refused before loading, with the
// numbers (and, for several instances, which one did not fit).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gantry/backend/factory.h"
#include "gantry/backend/loader.h"
#include "gantry/backend/registry.h"
#include "gantry/hw/registry.h"
#include "gantry/memory/block_pool.h"
#include "gantry/model/model_source.h"
#include "gantry/model/package.h"
#include "gantry/runtime/model_manager.h"
#include "gantry/runtime/queue_options.h"

namespace gantry::runtime {

// Alignment of every allocation from a CUDA device's pool (cudaMalloc's guarantee).
inline constexpr size_t kCudaAlignment = 256;

struct RuntimeOptions {
  // --memory-budget (see memory::parse_budget_spec); empty: 90 % of each device's free memory.
  std::string memory_budget;
  // One memory pool per device, charged to that device's budget per model: the CPU's (host memory) and
  // each CUDA device's (the driver's VMM API, made on first use, kCudaAlignment-aligned). ONNX Runtime's
  // sessions allocate from them, on the CPU and through its CUDA EP. false: ORT's own arenas, unbudgeted.
  // Not from a pool, and so outside the model's charge: the CUDA context itself (once per process, shared
  // with llama.cpp), cuBLAS/cuDNN handles' workspaces and ORT's pinned host staging buffers; the ONNX
  // backend's memory estimate adds a fixed allowance for the workspaces (OnnxBackend::estimate_memory).
  bool memory_pool = true;
  // Measured-policy verdicts: empty = VerdictCache::default_dir(); "none" = not cached.
  std::string verdict_cache_dir;
  std::chrono::milliseconds default_keep_alive = kDefaultKeepAlive;
  bool keep_alive_timer = true;  // unload idle models in the background when their keep_alive runs out
  // The machine to plan for instead of detecting this one (tests, --sysroot).
  std::optional<hw::Registry> hardware;
  // Backends to use instead of the built-in ONNX Runtime and llama.cpp ones (tests).
  std::vector<std::unique_ptr<backend::Backend>> backends;
  // Fetches an http(s) URL's model into memory, at most `max_bytes` of it (the CPU budget's capacity;
  // the CLI sets weights::fetch_model_source): load() and explain() of a URL go through it, and the model
  // is never written to disk. Unset: a URL source is InvalidArgument.
  std::function<Result<model::ModelSource>(const std::string& url, uint64_t max_bytes)> fetch_url;
};

// How one model is loaded. Every field is optional; the defaults come from the model's manifest and the
// backend (see gantry/backend/llama/llama_backend.h for the llama.cpp keys).
struct LoadOptions {
  std::string name;  // default: the package's name, else the file's stem ("tiny-llama.gguf" -> "tiny-llama")
  // Provider policy, --provider, --threads, measuring, and backend options over the manifest's
  // (`factory.llama`: n_ctx, parallel, kv_type, n_gpu_layers, mmap, ...; see gantry/model/backend_options.h).
  // A GGUF model's n_gpu_layers defaults to what the planner says fits. mmap false reads GGUF weights into
  // memory instead of mapping them (a mapped file overwritten in place kills the process with SIGBUS;
  // replace model files by renaming a new file over them instead).
  backend::LoadOptions factory;
  std::optional<std::chrono::milliseconds> keep_alive;  // default: RuntimeOptions::default_keep_alive
  // Instances per device (`--instances N`): copies of the model that run requests at once, each with its
  // own memory reserved (see gantry/runtime/instance_layout.h for the devices each strategy uses). 0: the
  // manifest's runtime.peak_concurrency, else 1. A text-generating model gets that many parallel sequences
  // of one context instead (unless llama.parallel is set).
  int instances = 0;
  bool pinned = false;
  bool verify_checksums = true;
  // How its requests are admitted and batched (the package's dynamic_batching over `queue.batching`).
  QueueOptions queue;
};

// What a provider choice looks like for one model, without loading it (`gantry plan --explain`).
struct Explanation {
  std::string model_name;
  std::string model_sha256;
  std::string backend;  // "onnxruntime 1.29.0"
  backend::ProviderChoice choice;
  std::optional<backend::MemoryEstimate> memory;  // for the chosen provider
};

// One device's budget as plain data (for `gantry serve`'s dashboard and logs).
struct BudgetInfo {
  std::string device;
  uint64_t capacity = 0;
  uint64_t used = 0;
  uint64_t peak = 0;
  std::vector<memory::OwnerUsage> owners;
};

class Runtime {
 public:
  static Result<std::unique_ptr<Runtime>> create(RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Loads (or returns the already loaded) model from `source`. Errors name the source and, for memory,
  // carry the numbers ("needs 1.9 GiB on cuda:0, budget 1.5 GiB, 1.2 GiB used by 2 models").
  // An http(s) URL is fetched with RuntimeOptions::fetch_url (unless a model of that name loaded from that
  // URL is ready: its handle is returned without fetching) and loaded from memory.
  Result<ModelHandle> load(const std::string& source, const LoadOptions& options = {});
  // The same from a ModelSource: a path, or a bare ONNX / GGUF model in memory (see
  // gantry/model/model_source.h). A model from bytes is estimated, reserved in the budgets and loaded
  // exactly as its file would be (ONNX Runtime from the bytes, llama.cpp mapping the sealed image); the
  // image lives as long as the loaded model. Its ModelInfo::source is the source's name (e.g. the URL).
  Result<ModelHandle> load(const model::ModelSource& source, const LoadOptions& options = {});
  // A handle to a loaded model by name.
  Result<ModelHandle> get(std::string_view name);
  Status unload(std::string_view name);
  std::vector<ModelInfo> models() const;
  ModelManager& manager() { return *manager_; }

  // The provider choice (and memory estimate) for `source`, without keeping anything loaded.
  Result<Explanation> explain(const std::string& source, const LoadOptions& options = {},
                              bool measure_single = false);
  Result<Explanation> explain(const model::ModelSource& source, const LoadOptions& options = {},
                              bool measure_single = false);

  // The machine as detected at create() (or refresh_hardware()): devices, CPU and host memory; the system
  // I/O section (storage, network, peers) is not probed, as nothing here reads it (`gantry detect` does).
  const hw::Registry& hardware() const { return hardware_; }
  // Detects the machine again (device free memory changes); budgets keep their capacities. Not safe while
  // another thread is inside load() or explain().
  void refresh_hardware();

  backend::BackendRegistry& backends() { return backends_; }
  Result<backend::Backend*> backend_for(model::ModelFormat format);
  std::vector<BudgetInfo> budgets() const;
  // The memory pool of `device` ("cpu", "cuda:0"), nullptr when there is none (memory_pool off, or no
  // budget there). Backends other than the built-in ones (tests) may allocate a model's memory from it.
  memory::BlockPool* pool(std::string_view device) const;

 private:
  Runtime() = default;
  Result<ModelHandle> load_package(std::shared_ptr<const model::Package> package, const LoadOptions& options);
  // `source` as a ModelSource: a URL fetched with options_.fetch_url, anything else a path.
  Result<model::ModelSource> resolve(const std::string& source) const;
  // The factory's options for `options`: the verdict cache filled in.
  backend::LoadOptions factory_options(const LoadOptions& options) const;
  // `rule_of_thumb` replaced by the model's cached memory profile where there is one (onnx_measure.h).
  backend::MemoryEstimate with_profile(backend::MemoryEstimate rule_of_thumb, const model::Package& package,
                                       const backend::Placement& p, const backend::Backend& be) const;

  RuntimeOptions options_;
  hw::Registry hardware_;
  Budgets budgets_;  // declared before the pools and the manager that charge them
  std::vector<std::shared_ptr<memory::BlockPool>>
      pools_;  // the backends borrow them: they outlive the models
  backend::BackendRegistry backends_;
  std::unique_ptr<backend::VerdictCache> verdicts_;
  std::unique_ptr<ModelManager> manager_;  // declared last: destroyed first (models before backends)
};

// The name a model loaded from `package` gets by default: the manifest's name (a bare file's stem).
std::string default_model_name(const model::Package& package);

}  // namespace gantry::runtime
