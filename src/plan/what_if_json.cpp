// JSON and text renderings of speed predictions and what-if reports.
#include <fmt/format.h>

#include <algorithm>

#include "gantry/plan/plan_json.h"
#include "gantry/plan/what_if.h"

namespace gantry::plan {
namespace {

using nlohmann::json;

json number_or_null(bool known, double v) { return known ? json(v) : json(nullptr); }

// "cpu: -, gpu:0: 0-15 +output, gpu:1: 16-31"
std::string split_text(const Plan& p) {
  std::vector<std::string> parts;
  for (const auto& d : p.devices) {
    if (d.layers.empty() && !d.has_output_layer) continue;
    std::string s = hw::memory_device_id(d.device) + " ";
    if (!d.layers.empty()) s += fmt::format("{}-{}", d.layers.front(), d.layers.back());
    if (d.has_output_layer) s += d.layers.empty() ? "out" : "+out";
    parts.push_back(s);
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

json speed_to_json(const SpeedPrediction& s) {
  json devices = json::array();
  for (const auto& d : s.devices) {
    devices.push_back({{"id", d.id},
                       {"bytes_per_token", d.bytes_per_token},
                       {"flops_per_token", d.flops_per_token},
                       {"generation_seconds_per_step", d.generation_seconds_per_step},
                       {"prompt_seconds_per_token", d.prompt_seconds_per_token},
                       {"network_bytes_per_step", d.network_bytes_per_step},
                       {"network_seconds_per_step", d.network_seconds_per_step}});
  }
  return {{"known", s.known},
          {"prompt_tokens_per_s", number_or_null(s.known, s.prompt_tokens_per_s)},
          {"generation_tokens_per_s", number_or_null(s.known, s.generation_tokens_per_s)},
          {"network_seconds_per_step", s.network_seconds_per_step},
          {"load_seconds", number_or_null(s.load_seconds > 0, s.load_seconds)},
          {"devices", devices},
          {"assumptions", s.assumptions}};
}

std::string speed_to_text(const SpeedPrediction& s) {
  std::string out = "\npredicted speed:\n";
  if (s.known) {
    out += fmt::format("  prompt {:.1f} tokens/s, generation {:.1f} tokens/s", s.prompt_tokens_per_s,
                       s.generation_tokens_per_s);
  } else {
    out += "  unknown (a device lacks a bandwidth or FLOP/s figure)";
  }
  out += s.load_seconds > 0 ? fmt::format(", load {:.2f} s\n", s.load_seconds) : "\n";
  for (const auto& d : s.devices) {
    if (d.bytes_per_token == 0) continue;
    out += fmt::format("  {:<8} reads {} per token, {:.3f} GFLOP per token", d.id,
                       human_bytes(d.bytes_per_token), d.flops_per_token / 1e9);
    if (d.network_bytes_per_step > 0) {
      out += fmt::format("; network {} and {:.2f} ms per step", human_bytes(d.network_bytes_per_step),
                         d.network_seconds_per_step * 1e3);
    }
    out += "\n";
  }
  for (const auto& a : s.assumptions) out += "  assumes: " + a + "\n";
  return out;
}

json what_if_to_json(const WhatIfReport& r) {
  json targets = json::array();
  for (const auto& x : r.results) {
    json split = json::array();
    for (const auto& d : x.plan.devices) {
      if (d.layers.empty() && !d.has_output_layer) continue;
      split.push_back({{"id", hw::memory_device_id(d.device)},
                       {"name", d.device.name},
                       {"layers", d.layers.size()},
                       {"first_layer", d.layers.empty() ? json(nullptr) : json(d.layers.front())},
                       {"last_layer", d.layers.empty() ? json(nullptr) : json(d.layers.back())},
                       {"output_layer", d.has_output_layer},
                       {"predicted_bytes", d.predicted.total()},
                       {"free_bytes", device_free_bytes(d.device)}});
    }
    const auto& t = x.target;
    targets.push_back(
        {{"target", t.id},
         {"description", t.description},
         {"gpus",
          std::count_if(t.devices.begin(), t.devices.end(), [](const Device& d) { return is_gpu(d); })},
         {"interconnect", t.interconnect},
         {"fits", x.fits},
         {"quantization", x.quantisation.empty() ? json(nullptr) : json(x.quantisation)},
         {"weight_bytes", x.weight_bytes},
         {"total_bytes", x.plan.totals.total()},
         {"split", split},
         {"speed", x.fits ? speed_to_json(x.speed) : json(nullptr)},
         {"price_usd_per_hour", t.price_usd_per_hour ? json(*t.price_usd_per_hour) : json(nullptr)},
         {"price_date", t.price_date.empty() ? json(nullptr) : json(t.price_date)},
         {"price_source", t.price_source.empty() ? json(nullptr) : json(t.price_source)},
         {"price_note", t.price_note.empty() ? json(nullptr) : json(t.price_note)},
         {"usd_per_million_tokens",
          x.usd_per_million_tokens ? json(*x.usd_per_million_tokens) : json(nullptr)},
         {"missing", x.missing.empty() ? json(nullptr) : json(x.missing)},
         {"max_context", x.fits ? json(x.max_context) : json(nullptr)}});
  }
  return {{"model", r.model},
          {"catalogue", {{"path", r.catalogue_path}, {"version", r.catalogue_version}}},
          {"targets", targets},
          {"fits_anywhere", r.missing.empty() && !r.results.empty()},
          {"missing", r.missing.empty() ? json(nullptr) : json(r.missing)}};
}

std::string what_if_to_text(const WhatIfReport& r) {
  std::string out = fmt::format("what-if for {} (catalogue {}, version {}), cheapest first:\n", r.model,
                                r.catalogue_path, r.catalogue_version);
  out += fmt::format("{:<22} {:<5} {:<8} {:>8} {:>10} {:>10} {:>8} {:>9} {:>10}  {}\n", "target", "fits",
                     "quant", "max ctx", "gen tok/s", "pp tok/s", "load s", "$/hour", "$/M tok", "split");
  for (const auto& x : r.results) {
    const bool sp = x.fits && x.speed.known;
    out += fmt::format(
        "{:<22} {:<5} {:<8} {:>8} {:>10} {:>10} {:>8} {:>9} {:>10}  {}\n", x.target.id, x.fits ? "yes" : "no",
        x.quantisation.empty() ? "-" : x.quantisation, x.fits ? std::to_string(x.max_context) : "-",
        sp ? fmt::format("{:.1f}", x.speed.generation_tokens_per_s) : "-",
        sp ? fmt::format("{:.0f}", x.speed.prompt_tokens_per_s) : "-",
        x.fits && x.speed.load_seconds > 0 ? fmt::format("{:.1f}", x.speed.load_seconds) : "-",
        x.target.price_usd_per_hour ? fmt::format("{:.2f}", *x.target.price_usd_per_hour) : "-",
        x.usd_per_million_tokens ? fmt::format("{:.3f}", *x.usd_per_million_tokens) : "-",
        x.fits ? split_text(x.plan) : x.missing);
  }
  if (!r.missing.empty()) out += "missing: " + r.missing + "\n";
  // The assumptions are the same for every target but the per-device figures: print the shared ones once.
  for (const auto& x : r.results) {
    if (!x.fits) continue;
    for (size_t i = 0; i < x.speed.assumptions.size() && i < 4; ++i)
      out += "assumes: " + x.speed.assumptions[i] + "\n";
    break;
  }
  out += "prices (on-demand USD per hour; the date is when the figure was taken):\n";
  std::vector<std::string> notes;
  for (const auto& x : r.results) {
    if (!x.target.price_usd_per_hour) continue;
    out += fmt::format("  {}: {:.2f}, {}, {}\n", x.target.id, *x.target.price_usd_per_hour,
                       x.target.price_date, x.target.price_source);
    if (!x.target.price_note.empty() &&
        std::find(notes.begin(), notes.end(), x.target.price_note) == notes.end())
      notes.push_back(x.target.price_note);
  }
  for (const auto& n : notes) out += "  note: " + n + "\n";
  return out;
}

}  // namespace gantry::plan
