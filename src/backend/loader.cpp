#include "gantry/backend/loader.h"

#include <map>

#include "gantry/core/log.h"
#include "gantry/hw/detect.h"

namespace gantry::backend {

ProviderRequest provider_request(const model::Manifest& mf) {
  ProviderRequest r;
  const auto& hw = mf.hardware_requirements;
  r.model_name = mf.name;
  r.preferred_provider = hw.preferred_provider;
  r.fallback_providers = hw.fallback_providers;
  r.min_memory_mb = hw.min_memory_mb.value_or(0);
  r.min_vram_mb = hw.min_vram_mb.value_or(0);
  r.min_cuda_version = hw.min_cuda_version;
  r.device_id = hw.device_id;
  r.gpu_device_ids = hw.gpu_device_ids;
  r.required_precision = hw.required_precision;
  if (hw.strategy) r.strategy = *hw.strategy;
  Placement& p = r.base;
  const auto& rt = mf.runtime;
  p.intra_op_threads = rt.intra_op_threads.value_or(0);
  p.inter_op_threads = rt.inter_op_threads.value_or(0);
  p.onnx = mf.onnx;
  if (mf.io)
    for (const auto* list : {&mf.io->inputs, &mf.io->outputs})
      for (const auto& t : *list)
        if (!t.bucket_dims.empty()) p.onnx.bucket_dims[t.name] = t.bucket_dims;
  p.llama = mf.llama;
  p.strategy = r.strategy;
  return r;
}

namespace {

// kapsl logs every provider it tries; so does the loader: one line per candidate refused (by the factory or
// by a failed load, with the reason), one for the one that loaded, a warning when that is the last-resort
// CPU.
void log_refused(const std::string& model, const CandidateVerdict& c) {
  GANTRY_LOG_INFO("model '{}': provider {} ({}) refused: {}", model, c.provider, c.origin, c.reason);
}

ProviderRequest request_for(const model::Package& package, const LoadOptions& options,
                            ProviderPolicy& policy) {
  ProviderRequest req = provider_request(package.manifest());
  if (!options.provider.empty()) {
    req.preferred_provider = options.provider;
    req.fallback_providers.clear();
    req.cpu_last_resort = false;  // the user named this provider: no other one
    policy = ProviderPolicy::kManifest;
  }
  if (options.intra_op_threads > 0) req.base.intra_op_threads = options.intra_op_threads;
  model::LlamaOptions llama = options.llama_defaults;
  if (auto& file = req.base.llama.chat_template_file) {
    // A manifest's chat template lies in its package (a flag's is relative to the working directory).
    auto inside = model::resolve_package_file(package.root(), *file, "llama.chat_template_file");
    file = inside.ok() ? inside->string() : (package.root() / *file).string();
  }
  if (auto& draft = req.base.llama.draft_model) {
    // So does its draft model (speculative decoding).
    auto inside = model::resolve_package_file(package.root(), *draft, "llama.draft_model");
    draft = inside.ok() ? inside->string() : (package.root() / *draft).string();
  }
  model::overlay(llama, req.base.llama);
  model::overlay(llama, options.llama);
  // llama-server's rule: a slot count no one chose (a command's default) shares one KV pool, so one
  // request may use the whole context; a chosen one gives each slot its own, faster, stream.
  if (!llama.kv_unified && options.llama_defaults.parallel && !req.base.llama.parallel &&
      !options.llama.parallel)
    llama.kv_unified = true;
  req.base.llama = std::move(llama);
  return req;
}

}  // namespace

ProviderChoice choose_provider(Backend& backend, const model::Package& package, const hw::Registry& machine,
                               const LoadOptions& options) {
  ProviderPolicy policy = options.policy;
  ProviderRequest req = request_for(package, options, policy);
  ProviderChoice choice = check_candidates(req, machine, backend, policy);
  if (policy == ProviderPolicy::kMeasured) {
    MeasureContext ctx;
    ctx.model_sha256 = package.model_sha256();
    ctx.runtime_version = std::string(backend.name()) + "-" + backend.version();
    ctx.cache = options.cache;
    ctx.budget_ms = options.measure_budget_ms;
    ctx.measure_single = options.measure_single;
    ctx.measure = [&](const Placement& p, double budget_ms) {
      return backend.measure(package, p, budget_ms);
    };
    measure_candidates(choice, machine, ctx);
  }
  if (!options.provider.empty()) choice.policy = options.policy;  // report what the user asked for
  return choice;
}

Result<LoadedModel> load_model(Backend& backend, const model::Package& package, const hw::Registry& machine,
                               const LoadOptions& options, const LoadFn& load) {
  LoadedModel out;
  out.choice = choose_provider(backend, package, machine, options);
  auto& choice = out.choice;
  // Try the chosen candidate, then the other viable ones in order.
  std::vector<int> order;
  if (choice.chosen >= 0) order.push_back(choice.chosen);
  for (int i = 0; i < static_cast<int>(choice.candidates.size()); ++i)
    if (i != choice.chosen && choice.candidates[i].viable) order.push_back(i);
  bool all_out_of_memory = !order.empty();
  const std::string& name = package.manifest().name;
  auto log_refusals = [&] {
    for (const auto& c : choice.candidates)
      if (!c.viable) log_refused(name, c);
  };
  for (int i : order) {
    auto& c = choice.candidates[i];
    Placement p = choice.placement;
    p.provider = c.provider;
    p.device_ids = c.device_ids;
    auto m = load ? load(p) : backend.load(package, p);
    if (m.ok()) {
      log_refusals();
      choice.chosen = i;
      choice.placement = p;
      out.model = std::move(m).value();
      if (c.origin == "last resort") {
        std::string named;
        for (const auto& other : choice.candidates)
          if (&other != &c) named += (named.empty() ? "" : ", ") + other.provider;
        GANTRY_LOG_WARN(
            "model '{}': no provider its manifest names ({}) can run here; loaded on the CPU as a last "
            "resort",
            name, named);
      } else {
        GANTRY_LOG_INFO("model '{}': provider {} ({}) accepted: {}", name, c.provider, c.origin, c.reason);
      }
      return out;
    }
    // A model that is broken fails the same way everywhere: do not hide it behind a fallback.
    const StatusCode code = m.status().code();
    if (code != StatusCode::kUnavailable && code != StatusCode::kResourceExhausted) return m.status();
    c.viable = false;
    c.reason = "loading failed: " + m.status().message();
    if (code != StatusCode::kResourceExhausted) all_out_of_memory = false;
  }
  log_refusals();
  choice.chosen = -1;
  std::string msg = "no provider can run model '" + package.manifest().name + "':\n" + choice.explain();
  return all_out_of_memory ? ResourceExhausted(msg) : Unavailable(msg);
}

hw::Registry local_machine() {
  hw::DetectOptions options;
  options.use_vulkan = false;
  options.skip = {"io"};  // what the factory reads is the devices, not storage or network
  return hw::detect_local(options);
}

}  // namespace gantry::backend
