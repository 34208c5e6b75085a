#include "gantry/runtime/runtime.h"

#include <fmt/format.h>

#include <filesystem>

#include "gantry/backend/llama/llama_backend.h"
#include "gantry/backend/onnx/onnx_backend.h"
#include "gantry/backend/onnx/ort_env.h"
#include "gantry/core/log.h"
#include "gantry/hw/detect.h"
#include "gantry/runtime/instance_group.h"
#include "gantry/runtime/instance_layout.h"
#include "gantry/runtime/model_queue.h"
#include "gantry/runtime/onnx_measure.h"

namespace gantry::runtime {
namespace {

namespace fs = std::filesystem;

// Free memory of the host (available, or the container limit when lower) and of every accelerator
// whose memory the registry knows, by device id.
std::map<std::string, uint64_t> free_memory(const hw::Registry& reg) {
  std::map<std::string, uint64_t> out;
  uint64_t host = reg.host.memory_available_bytes.value_or(reg.host.memory_total_bytes.value_or(0));
  if (reg.host.memory_limit_bytes && *reg.host.memory_limit_bytes < host) host = *reg.host.memory_limit_bytes;
  out["cpu"] = host;
  for (const auto& d : reg.devices) {
    if (d.kind == hw::DeviceKind::kCpu) continue;
    const auto free = d.memory_free_bytes ? d.memory_free_bytes : d.memory_total_bytes;
    if (free) out[d.id] = *free;
  }
  return out;
}

Result<Budgets> make_budgets(const hw::Registry& reg, std::string_view spec_text) {
  memory::BudgetSpec spec;  // default: 90 % of each device's free memory
  if (!spec_text.empty()) {
    GANTRY_ASSIGN_OR_RETURN(spec, memory::parse_budget_spec(spec_text));
  }
  const auto free = free_memory(reg);
  for (const auto& [device, limit] : spec.devices) {
    if (free.count(device) == 0) {
      std::string have;
      for (const auto& [id, bytes] : free) have += (have.empty() ? "" : ", ") + id;
      return InvalidArgument("--memory-budget names device '" + device +
                             "', which this machine does not have (" + have + ")");
    }
  }
  Budgets budgets;
  for (const auto& [device, bytes] : free)
    budgets.emplace(device, std::make_unique<memory::Budget>(device, spec.capacity_for(device, bytes)));
  return budgets;
}

}  // namespace

std::string default_model_name(const model::Package& package) { return package.manifest().name; }

Result<std::unique_ptr<Runtime>> Runtime::create(RuntimeOptions options) {
  std::unique_ptr<Runtime> rt(new Runtime());
  if (options.hardware) {
    rt->hardware_ = *options.hardware;
  } else {
    hw::DetectOptions d;
    d.use_vulkan = false;  // slow, and no backend here runs on Vulkan
    d.skip = {"io"};       // storage, network and peers: no load or budget reads them
    rt->hardware_ = hw::detect_local(d);
  }
  GANTRY_ASSIGN_OR_RETURN(rt->budgets_, make_budgets(rt->hardware_, options.memory_budget));

  if (options.verdict_cache_dir != "none") {
    rt->verdicts_ = std::make_unique<backend::VerdictCache>(
        options.verdict_cache_dir.empty() ? backend::VerdictCache::default_dir() : options.verdict_cache_dir);
  }
  memory::BlockPool* cpu_pool = nullptr;
  std::vector<memory::BlockPool*> device_pools;
  if (options.memory_pool) {
    // ONNX Runtime draws host memory from a pool charged to the CPU budget, per model; so do llama.cpp's
    // CPU weights where that is no slower (llama::LoadOptions::cpu_pool).
    memory::Budget* cpu = rt->budgets_.at("cpu").get();
    memory::BlockPoolOptions po;
    po.capacity = cpu->capacity();
    po.budget = cpu;
    auto pool = std::make_shared<memory::BlockPool>(memory::make_host_backing(), po);
    cpu_pool = pool.get();
    rt->pools_.push_back(std::move(pool));
    // And one pool per CUDA device over the driver's VMM API (made on its first block), charged to that
    // device's budget: ONNX Runtime's CUDA EP allocates a model's device memory from it. 256-byte aligned,
    // as cudaMalloc is, which CUDA kernels assume.
    for (const auto& d : rt->hardware_.devices) {
      if (d.family != hw::kFamilyCuda) continue;
      auto b = rt->budgets_.find(hw::memory_device_id(d));
      if (b == rt->budgets_.end()) continue;
      memory::BlockPoolOptions dpo;
      dpo.capacity = b->second->capacity();
      dpo.budget = b->second.get();
      dpo.min_alignment = kCudaAlignment;
      auto dpool =
          std::make_shared<memory::BlockPool>(memory::make_lazy_cuda_backing(hw::family_index(d)), dpo);
      device_pools.push_back(dpool.get());
      rt->pools_.push_back(std::move(dpool));
    }
  }
  std::vector<std::unique_ptr<backend::Backend>> backends = std::move(options.backends);
  if (backends.empty()) {
    onnx::OnnxBackendOptions onnx_options;
    onnx_options.cpu_pool = cpu_pool;
    onnx_options.device_pools = device_pools;
    backends.push_back(onnx::make_onnx_backend(onnx_options));
    // The CPU budget also holds the llama models' host prompt caches (given back first under pressure).
    backends.push_back(llama::make_llama_backend(cpu_pool, rt->budgets_.at("cpu").get()));
  }
  for (auto& b : backends) GANTRY_RETURN_IF_ERROR(rt->backends_.add(std::move(b)));

  rt->options_ = std::move(options);
  rt->manager_ = std::make_unique<ModelManager>(rt->budgets_);
  if (rt->options_.keep_alive_timer) rt->manager_->start_keep_alive_timer();
  for (const auto& [device, budget] : rt->budgets_)
    GANTRY_LOG_DEBUG("memory budget {}: {}", device, memory::format_bytes(budget->capacity()));
  return rt;
}

Runtime::~Runtime() {
  manager_.reset();  // every model (and its sessions) first
  // The ORT env outlives this Runtime: it must stop handing out memory from pools about to go.
  if (!pools_.empty()) {
    if (auto ort = onnx::OrtRuntime::get(); ort.ok())
      for (const auto& pool : pools_) (*ort)->release_pool(pool.get());
  }
}

void Runtime::refresh_hardware() {
  hw::DetectOptions d;
  d.use_vulkan = false;
  d.skip = {"io"};
  if (!options_.hardware) hardware_ = hw::detect_local(d);
}

Result<backend::Backend*> Runtime::backend_for(model::ModelFormat format) {
  return backends_.for_format(model::model_format_name(format));
}

backend::LoadOptions Runtime::factory_options(const LoadOptions& options) const {
  backend::LoadOptions f = options.factory;
  if (f.cache == nullptr) f.cache = verdicts_.get();
  return f;
}

Result<model::ModelSource> Runtime::resolve(const std::string& source) const {
  if (!model::is_model_url(source)) return model::ModelSource::file(source);
  if (!options_.fetch_url) return InvalidArgument(source + ": this runtime cannot fetch models from URLs");
  // The image lives in host memory: never more than the whole CPU budget (idle models may still be evicted
  // to make room for what the model itself needs, as for a file).
  const auto cpu = budgets_.find("cpu");
  return options_.fetch_url(source, cpu == budgets_.end() ? 0 : cpu->second->capacity());
}

Result<ModelHandle> Runtime::load(const std::string& source, const LoadOptions& options) {
  if (model::is_model_url(source)) {
    // Already loaded from this URL: no download.
    const std::string name =
        options.name.empty() ? fs::path(model::source_file_name(source)).stem().string() : options.name;
    if (auto info = manager_->info(name); info && info->state == ModelState::kReady && info->source == source)
      if (auto h = manager_->acquire(name); h.ok()) return h;
  }
  GANTRY_ASSIGN_OR_RETURN(model::ModelSource src, resolve(source));
  return load(src, options);
}

Result<ModelHandle> Runtime::load(const model::ModelSource& source, const LoadOptions& options) {
  model::LoadOptions lo;
  lo.verify_checksums = options.verify_checksums;
  GANTRY_ASSIGN_OR_RETURN(model::Package package, model::load_package(source, lo));
  return load_package(std::make_shared<const model::Package>(std::move(package)), options);
}

Result<ModelHandle> Runtime::load_package(std::shared_ptr<const model::Package> package,
                                          const LoadOptions& options) {
  const std::string name = options.name.empty() ? default_model_name(*package) : options.name;
  std::error_code ec;
  const std::string source = package->kind() == model::PackageKind::kMemory
                                 ? package->source().string()
                                 : fs::absolute(package->source(), ec).lexically_normal().string();
  if (auto info = manager_->info(name); info && info->state == ModelState::kReady && info->source != source) {
    return FailedPrecondition("a model named '" + name + "' is already loaded from " + info->source +
                              "; unload it first or load " + source + " under another name");
  }
  GANTRY_ASSIGN_OR_RETURN(backend::Backend * be, backend_for(package->manifest().format));
  backend::LoadOptions fo = factory_options(options);

  ManagedLoadOptions mo;
  mo.keep_alive = options.keep_alive.value_or(options_.default_keep_alive);
  mo.pinned = options.pinned;
  mo.source = source;
  mo.queue = options.queue;
  mo.queue.batching = batching_for(options.queue.batching, package->manifest().dynamic_batching);
  GANTRY_ASSIGN_OR_RETURN(ModelManager::Begin begin, manager_->begin_load(name, mo));
  if (auto* handle = std::get_if<ModelHandle>(&begin)) return std::move(*handle);
  ModelManager::Admission admission = std::get<ModelManager::Admission>(std::move(begin));

  const model::Manifest& mf = package->manifest();
  const bool text = be->capabilities().text_generation;
  const int per_device = options.instances > 0 ? options.instances : mf.runtime.peak_concurrency.value_or(1);
  // llama.cpp runs concurrent requests as parallel sequences of one context: the count becomes its default.
  if (text && per_device > 1) fo.llama_defaults.parallel = per_device;

  // Each candidate provider: lay out the instances, estimate and reserve each one's memory (evicting idle
  // models if needed), then load them.
  auto reserve_and_load =
      [&](const backend::Placement& candidate) -> Result<std::unique_ptr<backend::Model>> {
    backend::Placement p = candidate;
    p.model_name = name;  // the model's metadata name and the owner of its memory in the budgets
    InstanceRequest ir;
    ir.chosen = p;
    ir.family = be->provider_family(p.provider);
    ir.listed = mf.hardware_requirements.gpu_device_ids;
    ir.per_device = per_device;
    ir.text_generation = text;
    ir.model_parallel = be->capabilities().model_parallel;
    ir.free_bytes = [this](const std::string& device) -> uint64_t {
      auto b = budgets_.find(device);
      return b == budgets_.end() ? 0 : b->second->available();
    };
    GANTRY_ASSIGN_OR_RETURN(InstanceLayout layout, plan_instances(ir, hardware_));
    const size_t n = layout.instances.size();
    if (n > 1) GANTRY_LOG_INFO("model '{}': {}", name, layout.reason);
    backend::MemoryEstimate total;
    for (size_t k = 0; k < n; ++k) {
      GANTRY_ASSIGN_OR_RETURN(backend::MemoryEstimate estimate,
                              be->estimate_memory(*package, layout.instances[k]));
      // An ONNX model measured with `gantry plan --measure` reserves what its cached profile says.
      if (verdicts_) estimate = with_profile(std::move(estimate), *package, layout.instances[k], *be);
      for (const auto& [device, bytes] : estimate.bytes) total.bytes[device] += bytes;
      total.exact = estimate.exact;
      total.basis = n == 1 ? estimate.basis
                           : fmt::format("{} instance(s) of {} each: {}", k + 1,
                                         memory::format_bytes(estimate.total()), estimate.basis);
      if (Status st = admission.reserve(total); !st.ok()) {
        if (st.code() != StatusCode::kResourceExhausted) return st;
        // What a user can change: the context and KV type of a generating model, or the budget.
        std::string msg = st.message();
        if (n > 1)
          msg = fmt::format("instance {} of {} ({}) cannot be held: {}", k + 1, n, layout.devices[k], msg);
        return ResourceExhausted(msg + (text ? "; try a smaller --ctx, --kv-type q8_0 or q4_0, or a larger "
                                               "--memory-budget"
                                        : n > 1 ? "; load fewer --instances, unload a model or give a "
                                                  "larger --memory-budget"
                                                : "; unload a model or give a larger --memory-budget"));
      }
    }
    std::vector<InstanceGroup::Instance> instances;
    for (size_t k = 0; k < n; ++k) {
      auto m = be->load(*package, layout.instances[k]);
      if (!m.ok()) {
        admission.release_reservation();
        if (n == 1) return m.status();
        return m.status().with_context(fmt::format("instance {} of {} on {}", k + 1, n, layout.devices[k]));
      }
      instances.push_back({std::move(m).value(), layout.devices[k]});
    }
    if (n == 1) return std::move(instances.front().model);
    return std::unique_ptr<backend::Model>(std::make_unique<InstanceGroup>(std::move(instances)));
  };
  auto loaded = backend::load_model(*be, *package, hardware_, fo, reserve_and_load);
  if (!loaded.ok()) {
    const Status st = loaded.status().with_context("loading " + source);
    admission.fail(st);
    return st;
  }
  if (Status s = loaded->model->init(); !s.ok()) {
    admission.fail(s);
    return s.with_context("initialising '" + name + "'");
  }
  return admission.finish(std::move(loaded->model), std::string(be->name()),
                          loaded->choice.placement.provider, package);
}

Result<ModelHandle> Runtime::get(std::string_view name) { return manager_->acquire(name); }

Status Runtime::unload(std::string_view name) { return manager_->unload(name); }

std::vector<ModelInfo> Runtime::models() const { return manager_->list(); }

Result<Explanation> Runtime::explain(const std::string& source, const LoadOptions& options,
                                     bool measure_single) {
  GANTRY_ASSIGN_OR_RETURN(model::ModelSource src, resolve(source));
  return explain(src, options, measure_single);
}

Result<Explanation> Runtime::explain(const model::ModelSource& source, const LoadOptions& options,
                                     bool measure_single) {
  model::LoadOptions lo;
  lo.verify_checksums = options.verify_checksums;
  GANTRY_ASSIGN_OR_RETURN(model::Package package, model::load_package(source, lo));
  GANTRY_ASSIGN_OR_RETURN(backend::Backend * be, backend_for(package.manifest().format));
  backend::LoadOptions fo = factory_options(options);
  fo.measure_single = measure_single;
  Explanation ex;
  ex.model_name = options.name.empty() ? default_model_name(package) : options.name;
  ex.model_sha256 = package.model_sha256();
  ex.backend = std::string(be->name()) + " " + be->version();
  ex.choice = backend::choose_provider(*be, package, hardware_, fo);
  if (ex.choice.chosen >= 0) {
    backend::Placement p = ex.choice.placement;
    auto est = be->estimate_memory(package, p);
    if (est.ok()) ex.memory = verdicts_ ? with_profile(std::move(*est), package, p, *be) : std::move(*est);
  }
  return ex;
}

memory::BlockPool* Runtime::pool(std::string_view device) const {
  for (const auto& p : pools_)
    if (p->device() == device) return p.get();
  return nullptr;
}

backend::MemoryEstimate Runtime::with_profile(backend::MemoryEstimate rule_of_thumb,
                                              const model::Package& package, const backend::Placement& p,
                                              const backend::Backend& be) const {
  auto measured = profile_reservation(verdicts_->dir(), hardware_, package, p, be);
  if (!measured) return rule_of_thumb;
  // Devices the profile did not measure (an accelerator without a pool) keep the rule of thumb.
  for (const auto& [device, bytes] : rule_of_thumb.bytes) {
    if (measured->bytes.count(device)) continue;
    measured->bytes[device] = bytes;
    measured->exact = false;
    measured->basis += "; " + device + ": " + rule_of_thumb.basis;
  }
  return std::move(*measured);
}

std::vector<BudgetInfo> Runtime::budgets() const {
  std::vector<BudgetInfo> out;
  for (const auto& [device, b] : budgets_) {
    BudgetInfo i;
    i.device = device;
    i.capacity = b->capacity();
    i.used = b->used();
    i.peak = b->peak();
    i.owners = b->ledger();
    out.push_back(std::move(i));
  }
  return out;
}

}  // namespace gantry::runtime
