// Loading a package through the factory: manifest -> provider request -> choice -> loaded model.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "gantry/backend/backend.h"
#include "gantry/backend/factory.h"
#include "gantry/hw/registry.h"
#include "gantry/model/package.h"

namespace gantry::backend {

// The factory's view of a manifest's hardware_requirements and runtime options.
ProviderRequest provider_request(const model::Manifest& manifest);

struct LoadOptions {
  ProviderPolicy policy = ProviderPolicy::kFastest;
  std::string provider;      // non-empty: use only this provider (`--provider`), overriding the manifest
  int intra_op_threads = 0;  // > 0: overrides the manifest (`--threads`)
  const VerdictCache* cache = nullptr;  // measured policy: where verdicts are kept (null: not cached)
  double measure_budget_ms = 2000;
  bool measure_single = false;  // measured policy: time a lone viable candidate too
  // llama.cpp options over the manifest's (CLI flags: --ctx, --parallel, --kv-type, --gpu-layers, --no-mmap).
  model::LlamaOptions llama;
  // A command's own defaults, under the manifest's options (gantry serve decodes 4 sequences at once).
  // When the slot count comes from here alone and kv_unified from nowhere, the KV cache is unified (as
  // llama-server's with an automatic slot count); otherwise kv_unified defaults to off (settings.h).
  model::LlamaOptions llama_defaults;
};

struct LoadedModel {
  std::unique_ptr<Model> model;
  ProviderChoice choice;
};

// Checks (and for `measured`, times) the candidates without keeping a model loaded.
ProviderChoice choose_provider(Backend& backend, const model::Package& package, const hw::Registry& machine,
                               const LoadOptions& options);

// Loads the model under one candidate's placement (default: backend.load). The Runtime's version also
// reserves the model's memory first.
using LoadFn = std::function<Result<std::unique_ptr<Model>>(const Placement& placement)>;

// Chooses a provider and loads the model on it; when the chosen provider fails to load the model
// (Unavailable, or ResourceExhausted: it does not fit), the next viable candidate is tried and the
// failure is recorded as that candidate's rejection reason. Other errors (a broken model) end the
// search. When every candidate failed for lack of memory, the error is ResourceExhausted.
Result<LoadedModel> load_model(Backend& backend, const model::Package& package, const hw::Registry& machine,
                               const LoadOptions& options, const LoadFn& load = {});

// hw::detect_local() without what the factory does not read (Vulkan, the system I/O section).
hw::Registry local_machine();

}  // namespace gantry::backend
