#include "cli/plan_onnx.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "gantry/model/onnx_info.h"
#include "gantry/plan/onnx_profile.h"
#include "gantry/plan/plan_json.h"
#include "gantry/runtime/onnx_measure.h"

namespace gantry::cli {
namespace {

namespace fs = std::filesystem;

std::string mib(uint64_t b) { return fmt::format("{:.1f} MiB", static_cast<double>(b) / (1 << 20)); }

std::string batches_text(const std::vector<int64_t>& b) {
  std::string s;
  for (size_t i = 0; i < b.size(); ++i)
    s += (i == 0 ? "" : i + 1 == b.size() ? " and " : ", ") + std::to_string(b[i]);
  return s;
}

// Free memory of the device a profile names ("cpu": the host), 0 when unknown.
uint64_t free_bytes(const std::vector<plan::Device>& devices, const std::string& id) {
  for (const auto& d : devices) {
    if (id == "cpu" ? !plan::is_gpu(d) : d.id == id) return plan::device_free_bytes(d);
  }
  return 0;
}

double rel_error(uint64_t predicted, uint64_t measured) {
  if (measured == 0) return predicted == 0 ? 0.0 : 1.0;
  return (static_cast<double>(predicted) - static_cast<double>(measured)) / static_cast<double>(measured);
}

// The prediction at `batch` from the other points, when `batch` was measured and is not a base batch
// (so that the two can be compared): the point itself left out.
std::optional<plan::OnnxMemoryPrediction> predicted_without(const plan::OnnxMemoryProfile& profile,
                                                            int64_t batch) {
  plan::OnnxMemoryProfile others = profile;
  others.points.erase(std::remove_if(others.points.begin(), others.points.end(),
                                     [batch](const auto& p) { return p.batch == batch; }),
                      others.points.end());
  if (!profile.at(batch) || others.points.size() < 2 || !profile.batch_dynamic) return std::nullopt;
  auto p = plan::predict(others, batch);
  if (!p.ok()) return std::nullopt;
  return std::move(*p);
}

nlohmann::json errors_json(const plan::OnnxMemoryPrediction& predicted,
                           const plan::OnnxMemoryPrediction& measured) {
  uint64_t pa = 0, ma = 0;
  for (const auto& [d, b] : predicted.devices) pa += b.activations;
  for (const auto& [d, b] : measured.devices) ma += b.activations;
  return {{"activations", rel_error(pa, ma)},
          {"peak_in_use", rel_error(predicted.peak_in_use(), measured.peak_in_use())},
          {"reservation", rel_error(predicted.reservation(), measured.reservation())},
          {"total", rel_error(predicted.total(), measured.total())}};
}

int rule_of_thumb(const OnnxPlanRequest& q, const runtime::OnnxMeasureReport* report, std::ostream& out) {
  std::error_code ec;
  const fs::path path(q.model);
  plan::Plan p = plan::estimate_generic(path.filename().string(), fs::file_size(path, ec), q.devices);
  p.notes.push_back("gantry plan " + path.filename().string() +
                    " --measure loads it and runs it once in Gantry's pool for the real figures");
  if (report)
    for (const auto& n : report->notes) p.notes.push_back(n);
  out << (q.json ? plan::plan_to_json(p).dump(2) + "\n" : plan::plan_to_text(p));
  return 0;
}

}  // namespace

int run_onnx_plan(const OnnxPlanRequest& q, std::ostream& out, std::ostream& err) {
  // Only a model that parses is planned: an empty file or /etc/passwd does not "fit".
  if (auto info = model::read_onnx_info(q.model); !info.ok()) {
    err << "gantry: plan: " << info.status().to_string() << "\n";
    return 1;
  }
  if (q.batch && *q.batch < 1) {
    err << "gantry: plan: --batch must be at least 1\n";
    return 2;
  }
  if (q.measure && !q.local) {
    err << "gantry: plan: --measure runs the model on this machine; it cannot measure a --sysroot machine\n";
    return 2;
  }
  runtime::OnnxMeasureOptions o;
  for (const auto& s : q.shapes) {
    if (Status st = runtime::parse_input_shape(s, o.shapes); !st.ok()) {
      err << "gantry: plan: " << st.message() << "\n";
      return 2;
    }
  }
  if (q.batch) o.batches.push_back(*q.batch);
  if (q.machine) o.hardware = *q.machine;
  o.factory.policy = q.policy;
  o.factory.provider = q.provider;
  auto report = runtime::measure_onnx_memory(q.model, o, q.measure);
  if (!report.ok()) {
    // Without --measure a model the runtime cannot even identify still gets the rule of thumb.
    if (!q.measure && report.status().code() != StatusCode::kInvalidArgument)
      return rule_of_thumb(q, nullptr, out);
    err << "gantry: plan: " << (q.measure ? "--measure: " : "") << report.status().to_string() << "\n";
    return report.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  const plan::OnnxMemoryProfile& profile = report->profile;
  if (profile.points.empty()) return rule_of_thumb(q, &*report, out);

  const int64_t batch = q.batch ? *q.batch : (profile.batch_dynamic ? 1 : profile.points.front().batch);
  auto at = plan::predict(profile, batch);
  if (!at.ok()) {
    err << "gantry: plan: " << at.status().message()
        << (at.status().code() == StatusCode::kFailedPrecondition && profile.batch_dynamic
                ? "; --measure --batch " + std::to_string(batch) + " measures it"
                : "")
        << "\n";
    return 2;
  }
  const auto check = predicted_without(profile, batch);
  bool fits = true;
  for (const auto& [id, b] : at->devices) fits = fits && b.total() <= free_bytes(q.devices, id);
  const bool from_cache = report->measured.empty();

  if (q.json) {
    nlohmann::json points = plan::profile_to_json(profile)["points"];
    nlohmann::json devices = nlohmann::json::array();
    for (const auto& [id, b] : at->devices)
      devices.push_back({{"id", id},
                         {"free_bytes", free_bytes(q.devices, id)},
                         {"fits", b.total() <= free_bytes(q.devices, id)}});
    nlohmann::json totals = {
        {"weights", 0}, {"activations", 0}, {"load_peak", 0}, {"arena", 0}, {"outside_pool", 0}};
    for (const auto& [id, b] : at->devices) {
      totals["weights"] = totals["weights"].get<uint64_t>() + b.weights;
      totals["activations"] = totals["activations"].get<uint64_t>() + b.activations;
      totals["load_peak"] = totals["load_peak"].get<uint64_t>() + b.load_peak;
      totals["arena"] = totals["arena"].get<uint64_t>() + b.arena;
      totals["outside_pool"] = totals["outside_pool"].get<uint64_t>() + b.outside_pool;
    }
    totals["peak_in_use"] = at->peak_in_use();
    totals["reservation"] = at->reservation();
    totals["total"] = at->total();
    nlohmann::json j = {
        {"model", profile.model},
        {"format", "onnx"},
        {"estimate", false},
        {"backend", report->backend},
        {"provider", profile.provider},
        {"device", report->device},
        {"shapes", profile.shapes},
        {"batch_dynamic", profile.batch_dynamic},
        {"batch", batch},
        {"basis", at->basis},
        {"measured", at->measured ? plan::prediction_to_json(*at) : nlohmann::json(nullptr)},
        {"predicted", at->measured ? (check ? plan::prediction_to_json(*check) : nlohmann::json(nullptr))
                                   : plan::prediction_to_json(*at)},
        {"profile",
         {{"cache_file", report->cache_file},
          {"from_cache", from_cache},
          {"measured_now", report->measured},
          {"cached", report->cached},
          {"points", points}}},
        {"totals", totals},
        {"devices", devices},
        {"fits", fits},
        {"notes", report->notes}};
    if (at->measured && check) j["prediction_error"] = errors_json(*check, *at);
    out << j.dump(2) << "\n";
    return 0;
  }

  out << fmt::format("model: {} ({}, provider {} on {})\n", profile.model, report->backend, profile.provider,
                     report->device);
  out << fmt::format("inputs: {} (batch {}{})\n", profile.shapes, batch,
                     profile.batch_dynamic ? "" : ", fixed by the model");
  out << fmt::format("batch {}: {}{}\n", batch,
                     at->measured ? "measured (the memory pool's ledger after one inference)" : at->basis,
                     at->measured ? "" : " (activations scale with the batch; not measured)");
  out << fmt::format("  {:<8} {:>11} {:>12} {:>11} {:>13} {:>11} {:>11}  fits\n", "device", "weights",
                     "activations", "load peak", "outside pool", "arena", "total");
  for (const auto& [id, b] : at->devices) {
    const uint64_t free = free_bytes(q.devices, id);
    out << fmt::format("  {:<8} {:>11} {:>12} {:>11} {:>13} {:>11} {:>11}  {} (free {})\n", id,
                       mib(b.weights), mib(b.activations), mib(b.load_peak), mib(b.outside_pool),
                       mib(b.arena), mib(b.total()), b.total() <= free ? "yes" : "NO", mib(free));
  }
  out << fmt::format("  the budget reserves {} (pool peak {} + outside the pool); with the pool's arena {}\n",
                     mib(at->reservation()), mib(at->peak_in_use()), mib(at->total()));
  if (at->measured && check) {
    out << fmt::format("  {}: reserves {}, error {:+.2f}% (activations {:+.2f}%)\n", check->basis,
                       mib(check->reservation()), 100 * rel_error(check->reservation(), at->reservation()),
                       100 * errors_json(*check, *at)["activations"].get<double>());
  }
  out << "fits: " << (fits ? "yes" : "no") << "\n";
  std::vector<int64_t> all;
  for (const auto& p : profile.points) all.push_back(p.batch);
  if (from_cache) {
    out << fmt::format("profile: from the cache ({}); measured earlier at batch {}; nothing measured now\n",
                       report->cache_file, batches_text(all));
  } else {
    out << fmt::format(
        "profile: measured now at batch {}{}; {}\n", batches_text(report->measured),
        report->cached.empty() ? "" : ", batch " + batches_text(report->cached) + " from the cache",
        report->cache_file.empty() ? "not cached" : "cached in " + report->cache_file);
  }
  for (const auto& n : report->notes) out << "note: " << n << "\n";
  return 0;
}

}  // namespace gantry::cli
