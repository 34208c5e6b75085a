#include "gantry/plan/what_if.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include "gantry/plan/plan_json.h"

namespace gantry::plan {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

Device gpu_device(const Accelerator& a, int index) {
  const auto total = static_cast<uint64_t>(a.memory_gib * kGiB);
  const uint64_t free = total > kGpuReserveBytes ? total - kGpuReserveBytes : 0;
  return memory_target(fmt::format("gpu:{}", index), a.name, true, free, total);
}

WhatIfTarget gpu_target(const std::string& id, const Accelerator& a, int count, double host_gib) {
  WhatIfTarget t;
  t.id = id;
  t.description = fmt::format("{} x {}", count, a.name);
  const auto host_bytes = static_cast<uint64_t>(host_gib * kGiB);
  t.devices.push_back(memory_target("cpu", "host", false, host_bytes, host_bytes));
  t.speeds.push_back(DeviceSpeed{});  // the host holds no layers when everything is offloaded
  for (int i = 0; i < count; ++i) {
    t.devices.push_back(gpu_device(a, i));
    t.speeds.push_back(gpu_speed(a.memory_bandwidth_gb_s, a.fp16_dense_tflops, a.name));
  }
  return t;
}

WhatIfTarget instance_target(const Catalogue& c, const Instance& i) {
  WhatIfTarget t = gpu_target(i.id, *c.find_accelerator(i.accelerator), i.count, i.host_memory_gib);
  t.description = fmt::format("{} {}: {}", i.provider, i.name, t.description);
  t.storage_bytes_per_s = i.storage_bandwidth_gb_s * 1e9;
  t.interconnect = i.interconnect;
  t.price_usd_per_hour = i.price_usd_per_hour;
  t.price_date = i.price_date;
  t.price_source = i.price_source;
  t.price_note = i.price_note;
  return t;
}

// "8xa100-80gb" -> (8, "a100-80gb"); "l4" -> (1, "l4").
std::pair<int, std::string> split_count(const std::string& s) {
  const auto x = s.find('x');
  if (x == std::string::npos || x == 0) return {1, s};
  int n = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + x, n);
  if (ec != std::errc() || p != s.data() + x || n < 1 || n > 4096) return {1, s};
  return {n, s.substr(x + 1)};
}

Result<WhatIfTarget> accelerator_target(const Catalogue& c, const std::string& spec) {
  const auto [count, acc_id] = split_count(spec);
  const Accelerator* a = c.find_accelerator(acc_id);
  if (a == nullptr) return NotFound("");
  WhatIfTarget t = gpu_target(spec, *a, count, 2.0 * a->memory_gib * count);
  // Price: the per-GPU share of the cheapest instance with this accelerator.
  const Instance* cheapest = nullptr;
  for (const auto& i : c.instances) {
    if (i.accelerator != a->id) continue;
    if (!cheapest || i.price_usd_per_hour / i.count < cheapest->price_usd_per_hour / cheapest->count)
      cheapest = &i;
  }
  if (cheapest) {
    t.price_usd_per_hour = count * cheapest->price_usd_per_hour / cheapest->count;
    t.price_date = cheapest->price_date;
    t.price_source = cheapest->price_source;
    t.price_note = fmt::format("{} x the per-GPU share of {} {}{}", count, cheapest->provider, cheapest->name,
                               cheapest->price_note.empty() ? "" : "; " + cheapest->price_note);
    t.storage_bytes_per_s = cheapest->storage_bandwidth_gb_s * 1e9;
    t.interconnect = count > 1 ? cheapest->interconnect : "";
  }
  return t;
}

std::string known_ids(const Catalogue& c) {
  std::vector<std::string> ids = {"all", "this"};
  for (const auto& a : c.accelerators) ids.push_back(a.id);
  for (const auto& i : c.instances) ids.push_back(i.id);
  return fmt::format("{}", fmt::join(ids, ", "));
}

// Per-device shortfall of a plan that does not fit: "gpu:0 needs 12.3 GiB more (has 79.5 GiB)".
std::string shortfall(const Plan& p) {
  std::vector<std::string> parts;
  for (const auto& d : p.devices) {
    if (d.fits) continue;
    parts.push_back(fmt::format("{} needs {} more (has {} free, the plan needs {})",
                                hw::memory_device_id(d.device),
                                human_bytes(d.predicted.total() - device_free_bytes(d.device)),
                                human_bytes(device_free_bytes(d.device)), human_bytes(d.predicted.total())));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

uint64_t shortfall_bytes(const Plan& p) {
  uint64_t s = 0;
  for (const auto& d : p.devices) {
    if (!d.fits) s += d.predicted.total() - device_free_bytes(d.device);
  }
  return s;
}

}  // namespace

const std::vector<Quantisation>& quantisations() {
  static const std::vector<Quantisation> kQuants = {{"Q8_0", 8.5},    {"Q6_K", 6.56}, {"Q5_K_M", 5.7},
                                                    {"Q4_K_M", 4.89}, {"Q4_0", 4.5},  {"Q3_K_M", 3.91},
                                                    {"Q2_K", 3.0}};
  return kQuants;
}

ModelProfile requantised(const ModelProfile& m, double bpw) {
  ModelProfile q = m;
  const double now = m.n_params > 0 ? 8.0 * static_cast<double>(m.total_weight_bytes()) / m.n_params : bpw;
  const double f = now > 0 ? bpw / now : 1.0;
  auto scale = [f](uint64_t b) { return static_cast<uint64_t>(std::llround(static_cast<double>(b) * f)); };
  for (auto& l : q.layers) {
    l.weight_bytes = scale(l.weight_bytes);
    l.repack_bytes = 0;  // which tensors repack depends on the new types; unknown
  }
  q.input_weight_bytes = scale(q.input_weight_bytes);
  q.output_weight_bytes = scale(q.output_weight_bytes);
  q.output_repack_bytes = 0;
  q.mapped_span_bytes = 0;
  q.file_bytes = scale(q.file_bytes);
  return q;
}

bool names_this_machine(std::string_view spec) {
  std::string s(spec);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s.find("this") != std::string::npos || s.find("all") != std::string::npos;
}

Result<std::vector<WhatIfTarget>> resolve_targets(const Catalogue& c, std::string_view spec,
                                                  const std::optional<WhatIfTarget>& this_machine) {
  std::vector<WhatIfTarget> out;
  auto add = [&out](WhatIfTarget t) {
    for (const auto& o : out) {
      if (o.id == t.id) return;
    }
    out.push_back(std::move(t));
  };
  std::string_view rest = spec;
  while (true) {
    const auto comma = rest.find(',');
    std::string item = trim(rest.substr(0, comma));
    std::transform(item.begin(), item.end(), item.begin(), [](unsigned char ch) { return std::tolower(ch); });
    if (item.empty()) return InvalidArgument(fmt::format("--what-if \"{}\": an empty target", spec));
    if (item == "all") {
      for (const auto& a : c.accelerators) add(*accelerator_target(c, a.id));
      for (const auto& i : c.instances) add(instance_target(c, i));
      if (this_machine) add(*this_machine);
    } else if (item == "this") {
      if (!this_machine) return InvalidArgument("--what-if this: this machine's devices are not available");
      add(*this_machine);
    } else if (const Instance* i = c.find_instance(item)) {
      add(instance_target(c, *i));
    } else if (auto t = accelerator_target(c, item); t.ok()) {
      add(std::move(*t));
    } else {
      return InvalidArgument(fmt::format("--what-if: unknown target \"{}\" in catalogue {} (known: {})", item,
                                         c.path, known_ids(c)));
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

Result<WhatIfResult> evaluate_target(const std::vector<QuantisedProfile>& candidates,
                                     const PlanOptions& options, const WhatIfTarget& target) {
  if (candidates.empty()) return InvalidArgument("what-if: no model to plan");
  PlanOptions o = options;
  o.n_gpu_layers = -1;
  o.tensor_split.clear();
  WhatIfResult r;
  r.target = target;
  Plan p;
  const QuantisedProfile* used = nullptr;
  for (const auto& c : candidates) {
    GANTRY_ASSIGN_OR_RETURN(p, plan_gguf(c.profile, o, target.devices));
    used = &c;
    if (p.fits) {
      r.quantisation = c.quantisation;
      break;
    }
  }
  r.fits = p.fits;
  r.weight_bytes = used->profile.total_weight_bytes();
  if (r.fits) {
    GANTRY_ASSIGN_OR_RETURN(r.speed,
                            predict_speed(used->profile, p, target.speeds, target.storage_bytes_per_s));
    if (r.speed.known && target.price_usd_per_hour && r.speed.generation_tokens_per_s > 0) {
      r.usd_per_million_tokens =
          *target.price_usd_per_hour / (r.speed.generation_tokens_per_s * 3600.0) * 1e6;
    }
    const uint32_t train = used->profile.n_ctx_train;
    GANTRY_ASSIGN_OR_RETURN(r.max_context,
                            max_context(used->profile, o, target.devices, train > 0 ? train : kMaxContext));
  } else {
    r.missing = fmt::format("does not fit even at {}: {}",
                            used->quantisation == "as-is" ? "its own quantisation" : used->quantisation,
                            shortfall(p));
  }
  r.plan = std::move(p);
  return r;
}

Result<WhatIfResult> evaluate_target(const ModelProfile& m, const PlanOptions& options,
                                     const WhatIfTarget& target) {
  // As-is, then every nominal quantisation smaller than what the file has, scaled by bits per weight.
  std::vector<QuantisedProfile> candidates = {{"as-is", m}};
  const double bpw_now = m.n_params > 0 ? 8.0 * static_cast<double>(m.total_weight_bytes()) / m.n_params : 0;
  for (const auto& q : quantisations()) {
    if (q.bits_per_weight >= bpw_now - 0.25) continue;  // not smaller than what the file has
    candidates.push_back({q.name, requantised(m, q.bits_per_weight)});
  }
  return evaluate_target(candidates, options, target);
}

namespace {

template <typename Model>
Result<WhatIfReport> what_if_over(const std::string& name, const Model& model, const PlanOptions& options,
                                  const Catalogue& c, const std::vector<WhatIfTarget>& targets) {
  WhatIfReport rep;
  rep.model = name;
  rep.catalogue_path = c.path;
  rep.catalogue_version = c.version;
  for (const auto& t : targets) {
    GANTRY_ASSIGN_OR_RETURN(WhatIfResult r, evaluate_target(model, options, t));
    rep.results.push_back(std::move(r));
  }
  std::stable_sort(rep.results.begin(), rep.results.end(), [](const WhatIfResult& a, const WhatIfResult& b) {
    if (a.fits != b.fits) return a.fits;
    const bool pa = a.usd_per_million_tokens.has_value(), pb = b.usd_per_million_tokens.has_value();
    if (pa != pb) return pa;
    if (pa && *a.usd_per_million_tokens != *b.usd_per_million_tokens)
      return *a.usd_per_million_tokens < *b.usd_per_million_tokens;
    if (!a.fits) return shortfall_bytes(a.plan) < shortfall_bytes(b.plan);
    return a.speed.generation_tokens_per_s > b.speed.generation_tokens_per_s;
  });
  if (!rep.results.empty() && !rep.results.front().fits) {
    const WhatIfResult& closest = rep.results.front();
    rep.missing = fmt::format("fits none of the {} targets; the closest, {}, {}", rep.results.size(),
                              closest.target.id, closest.missing);
  }
  return rep;
}

}  // namespace

Result<WhatIfReport> what_if(const ModelProfile& m, const PlanOptions& options, const Catalogue& c,
                             const std::vector<WhatIfTarget>& targets) {
  return what_if_over(m.name, m, options, c, targets);
}

Result<WhatIfReport> what_if(const std::vector<QuantisedProfile>& candidates, const PlanOptions& options,
                             const Catalogue& c, const std::vector<WhatIfTarget>& targets) {
  if (candidates.empty()) return InvalidArgument("what-if: no model to plan");
  return what_if_over(candidates.front().profile.name, candidates, options, c, targets);
}

}  // namespace gantry::plan
