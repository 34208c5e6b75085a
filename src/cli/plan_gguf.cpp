#include "cli/plan_gguf.h"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>

#include "gantry/backend/llama/measure.h"
#include "gantry/plan/gguf_profile.h"
#include "gantry/plan/plan_json.h"
#include "gantry/plan/speed.h"
#include "gantry/plan/what_if.h"

namespace gantry::cli {
namespace {

namespace fs = std::filesystem;

// Loads the model the way `plan` placed it (through the backend's one Placement translation) and reads
// llama.cpp's real allocations.
Result<llama::MemoryMeasurement> measure_plan(const fs::path& path, const plan::Plan& p) {
  GANTRY_ASSIGN_OR_RETURN(llama::LlamaSettings s,
                          llama::llama_settings(llama::placement_from_plan(p), path.string()));
  return llama::measure_memory(path.string(), s);
}

nlohmann::json measurement_to_json(const llama::MemoryMeasurement& m) {
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& d : m.devices) {
    devices.push_back({{"device", d.device},
                       {"measured_bytes",
                        {{"weights", d.model_bytes},
                         {"kv_cache", d.kv_bytes},
                         {"compute", d.compute_bytes},
                         {"output", d.output_bytes},
                         {"total", d.total_bytes}}}});
  }
  return {{"devices", devices},
          {"measured_bytes",
           {{"weights", m.model_bytes},
            {"kv_cache", m.kv_bytes},
            {"compute", m.compute_bytes},
            {"output", m.output_bytes},
            {"total", m.total_bytes}}},
          {"rss_growth_bytes", m.rss_growth_bytes}};
}

std::string measurement_to_text(const llama::MemoryMeasurement& m, uint64_t predicted_total) {
  auto mib = [](double b) { return fmt::format("{:.1f} MiB", b / (1 << 20)); };
  std::string out = "\nmeasured (llama.cpp's allocations):\n";
  for (const auto& d : m.devices) {
    out += fmt::format("  {:<8} weights {}  kv {}  compute {}  output {}  total {}\n", d.device,
                       mib(d.model_bytes), mib(d.kv_bytes), mib(d.compute_bytes), mib(d.output_bytes),
                       mib(d.total_bytes));
  }
  const double err =
      m.total_bytes ? (static_cast<double>(predicted_total) - m.total_bytes) / m.total_bytes : 0;
  out += fmt::format("  predicted {} vs measured {}: error {:+.2f}%; process RSS grew {}\n",
                     mib(predicted_total), mib(m.total_bytes), 100.0 * err,
                     mib(static_cast<double>(m.rss_growth_bytes)));
  return out;
}

// --what-if: the model against the targets named (this machine timed only when named).
int run_what_if(const GgufPlanRequest& q, plan::ModelProfile profile, const plan::PlanOptions& options,
                std::ostream& out, std::ostream& err) {
  std::optional<plan::WhatIfTarget> self;
  if (plan::names_this_machine(q.what_if)) self = q.this_machine(profile).target;
  auto targets = plan::resolve_targets(*q.catalogue, q.what_if, self);
  if (!targets.ok()) {
    err << "gantry: plan: " << targets.status().message() << "\n";
    return 2;
  }
  profile.name = fs::path(q.model).filename().string();
  auto report = plan::what_if(profile, options, *q.catalogue, *targets);
  if (!report.ok()) {
    err << "gantry: plan: " << report.status().to_string() << "\n";
    return 2;
  }
  out << (q.json ? plan::what_if_to_json(*report).dump(2) + "\n" : plan::what_if_to_text(*report));
  return 0;
}

}  // namespace

int run_gguf_plan(const GgufPlanRequest& q, std::ostream& out, std::ostream& err) {
  const fs::path path(q.model);
  auto profile = plan::profile_from_gguf(path);
  if (!profile.ok()) {
    err << "gantry: plan: " << profile.status().to_string() << "\n";
    return 1;
  }
  plan::PlanOptions o = q.options;
  o.cpu_takes_share = plan::cpu_should_take_share(q.devices);
  auto p = plan::plan_gguf(*profile, o, q.devices);
  if (!p.ok()) {
    err << "gantry: plan: " << p.status().to_string() << "\n";
    return p.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  plan::Plan result = std::move(*p);
  result.model = path.filename().string() + " (" + profile->architecture + ", " +
                 std::to_string(profile->n_layer()) + " layers, " + profile->weight_type + ")";
  if (!q.what_if.empty()) return run_what_if(q, *profile, result.options, out, err);

  std::optional<plan::SpeedPrediction> speed;
  if (q.speed) {
    const plan::ThisMachine self = q.this_machine(*profile);
    auto s = plan::predict_speed(*profile, result, self.target.speeds, self.target.storage_bytes_per_s);
    if (!s.ok()) {
      err << "gantry: plan: --speed: " << s.status().to_string() << "\n";
      return 1;
    }
    s->assumptions.push_back(self.note);
    speed = std::move(*s);
  }
  std::optional<llama::MemoryMeasurement> measured;
  if (q.measure) {
    if (result.estimate) {
      err << "gantry: plan: --measure needs a GGUF model (ONNX plans are estimates)\n";
      return 2;
    }
    auto m = measure_plan(path, result);
    if (!m.ok()) {
      err << "gantry: plan: --measure: " << m.status().to_string() << "\n";
      return 1;
    }
    measured = std::move(*m);
  }
  if (q.json) {
    nlohmann::json j = plan::plan_to_json(result);
    if (measured) j["measured"] = measurement_to_json(*measured);
    if (speed) j["speed"] = plan::speed_to_json(*speed);
    out << j.dump(2) << "\n";
  } else {
    out << plan::plan_to_text(result);
    if (measured) out << measurement_to_text(*measured, result.totals.total());
    if (speed) out << plan::speed_to_text(*speed);
  }
  return 0;
}

}  // namespace gantry::cli
