#include "cli/plan_explain.h"

#include <iostream>
#include <nlohmann/json.hpp>

#include "gantry/memory/budget.h"
#include "gantry/runtime/runtime.h"

namespace gantry::cli {
namespace {

// `device_kind` predates device families in this JSON; scripts read it, so it keeps its old spellings.
std::string legacy_device_kind(std::string_view family) {
  if (family == hw::kFamilyCuda) return "nvidia-gpu";
  if (family == hw::kFamilyRocm) return "amd-gpu";
  if (family == hw::kFamilyApple) return "apple-gpu";
  if (family == hw::kFamilyCpu || family == hw::kFamilyIntelGpu) return std::string(family);
  return "other";
}

}  // namespace

int run_plan_explain(const std::string& model_path, bool json, const std::string& provider_policy,
                     std::ostream& out) {
  auto policy = backend::resolve_provider_policy(provider_policy);
  if (!policy.ok()) {
    std::cerr << "gantry plan: " << policy.status().message() << "\n";
    return 2;
  }
  runtime::RuntimeOptions ro;
  ro.keep_alive_timer = false;
  auto rt = runtime::Runtime::create(std::move(ro));
  if (!rt.ok()) {
    std::cerr << "gantry plan: " << rt.status().message() << "\n";
    return 1;
  }
  runtime::LoadOptions lo;
  lo.factory.policy = *policy;
  // An explanation shows the median even for a lone candidate.
  auto ex = (*rt)->explain(model_path, lo, /*measure_single=*/true);
  if (!ex.ok()) {
    std::cerr << "gantry plan: " << ex.status().message() << "\n";
    return 1;
  }
  const backend::ProviderChoice& choice = ex->choice;
  if (json) {
    nlohmann::json j;
    j["model"] = ex->model_name;
    j["sha256"] = ex->model_sha256;
    j["backend"] = ex->backend;
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
                       {"family", c.family},
                       {"device_kind", legacy_device_kind(c.family)}};
      e["median_us"] = c.median_us ? nlohmann::json(*c.median_us) : nlohmann::json();
      e["from_cache"] = c.from_cache;
      j["candidates"].push_back(std::move(e));
    }
    if (ex->memory) {
      j["memory"] = {
          {"bytes", ex->memory->bytes}, {"exact", ex->memory->exact}, {"basis", ex->memory->basis}};
    }
    out << j.dump(2) << "\n";
  } else {
    out << "model " << ex->model_name << " (" << ex->backend << ")\n";
    out << choice.explain();
    if (ex->memory) {
      out << "memory:";
      for (const auto& [device, bytes] : ex->memory->bytes)
        out << " " << device << " " << memory::format_bytes(bytes);
      out << " (" << ex->memory->basis << ")\n";
    }
  }
  return choice.chosen >= 0 ? 0 : 1;
}

}  // namespace gantry::cli
