#include "cli/plan_explain.h"

#include <iostream>
#include <nlohmann/json.hpp>

#include "gantry/backend/loader.h"
#include "gantry/backend/onnx/onnx_backend.h"

namespace gantry::cli {

int run_plan_explain(const std::string& model_path, bool json, const std::string& provider_policy,
                     std::ostream& out) {
  auto policy = backend::resolve_provider_policy(provider_policy);
  if (!policy.ok()) {
    std::cerr << "gantry plan: " << policy.status().message() << "\n";
    return 2;
  }
  auto package = model::load_package(model_path);
  if (!package.ok()) {
    std::cerr << "gantry plan: " << package.status().message() << "\n";
    return 1;
  }
  if (package->manifest().format != model::ModelFormat::kOnnx) {
    std::cerr << "gantry plan: --explain covers ONNX models (execution providers); " << model_path << " is "
              << model::model_format_name(package->manifest().format) << "\n";
    return 1;
  }
  onnx::OnnxBackend backend;
  backend::VerdictCache cache(backend::VerdictCache::default_dir());
  backend::LoadOptions options;
  options.policy = *policy;
  options.cache = &cache;
  options.measure_single = true;  // an explanation shows the median even for a lone candidate
  const backend::MachineView machine = backend::local_machine();
  backend::ProviderChoice choice = backend::choose_provider(backend, *package, machine, options);

  if (json) {
    nlohmann::json j;
    j["model"] = package->manifest().name;
    j["sha256"] = package->model_sha256();
    j["backend"] = std::string(backend.name()) + " " + backend.version();
    j["policy"] = std::string(backend::provider_policy_name(choice.policy));
    j["chosen"] =
        choice.chosen_verdict() ? nlohmann::json(choice.chosen_verdict()->provider) : nlohmann::json();
    j["candidates"] = nlohmann::json::array();
    for (const auto& c : choice.candidates) {
      nlohmann::json e{{"provider", c.provider},
                       {"origin", c.origin},
                       {"viable", c.viable},
                       {"reason", c.reason},
                       {"device_ids", c.device_ids},
                       {"device_kind", std::string(backend::device_kind_name(c.device_kind))}};
      e["median_us"] = c.median_us ? nlohmann::json(*c.median_us) : nlohmann::json();
      e["from_cache"] = c.from_cache;
      j["candidates"].push_back(std::move(e));
    }
    out << j.dump(2) << "\n";
  } else {
    out << "model " << package->manifest().name << " (" << backend.name() << " " << backend.version()
        << ")\n";
    out << choice.explain();
  }
  return choice.chosen >= 0 ? 0 : 1;
}

}  // namespace gantry::cli
