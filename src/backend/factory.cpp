#include "gantry/backend/factory.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gantry/core/enum_names.h"
#include "gantry/core/file_io.h"
#include "gantry/core/json.h"
#include "gantry/core/log.h"
#include "gantry/hw/query.h"

namespace gantry::backend {

namespace {

constexpr auto kProviderPolicies =
    enum_names<ProviderPolicy>("provider policy", {{ProviderPolicy::kFastest, "fastest"},
                                                   {ProviderPolicy::kManifest, "manifest"},
                                                   {ProviderPolicy::kMeasured, "measured"}});

}  // namespace

std::string_view provider_policy_name(ProviderPolicy p) { return kProviderPolicies.name_of(p, "fastest"); }

Result<ProviderPolicy> parse_provider_policy(std::string_view text) { return kProviderPolicies.parse(text); }

Result<ProviderPolicy> resolve_provider_policy(std::string_view flag) {
  if (!flag.empty()) return parse_provider_policy(flag);
  if (const char* env = std::getenv("GANTRY_PROVIDER_POLICY"); env && *env) {
    auto p = parse_provider_policy(env);
    if (!p.ok()) {
      GANTRY_LOG_WARN("GANTRY_PROVIDER_POLICY: {}; using 'fastest'", p.status().message());
      return ProviderPolicy::kFastest;
    }
    return p;
  }
  return ProviderPolicy::kFastest;
}

std::string canonical_provider(std::string_view name) {
  std::string s(name);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  constexpr std::string_view kSuffix = "executionprovider";
  if (s.size() > kSuffix.size() && s.ends_with(kSuffix)) s.resize(s.size() - kSuffix.size());
  if (s == "dml") s = "directml";
  return s;
}

namespace {

constexpr uint64_t kMiB = 1024 * 1024;

std::optional<Version> version_of(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  auto v = Version::parse(*text);
  return v.ok() ? std::optional<Version>(*v) : std::nullopt;
}

std::string join_ids(const std::vector<int>& ids) {
  std::string s;
  for (int i : ids) s += (s.empty() ? "" : ",") + std::to_string(i);
  return s;
}

// Checks one non-CPU candidate's devices; returns the rejection reason or "" when they fit.
std::string check_devices(const ProviderRequest& req, const hw::Registry& machine, const std::string& family,
                          const std::vector<int>& ids, const Backend& backend) {
  auto present = hw::family_devices(machine, family);
  if (present.empty()) return "no " + family + " device on this machine";
  for (int id : ids) {
    const hw::Device* d = hw::find_device(machine, family, id);
    if (!d)
      return "device id " + std::to_string(id) + " requested but this machine has " +
             std::to_string(present.size()) + " " + family + " device(s) (ids 0.." +
             std::to_string(present.size() - 1) + ")";
    if (req.min_vram_mb > 0) {
      const uint64_t free_mb = d->memory_free_bytes.value_or(0) / kMiB;
      const uint64_t have = free_mb > 0 ? free_mb : d->memory_total_bytes.value_or(0) / kMiB;
      if (have < req.min_vram_mb)
        return "needs " + std::to_string(req.min_vram_mb) + " MB of VRAM, " + d->id + " has " +
               std::to_string(have) + " MB " + (free_mb > 0 ? "free" : "in total");
    }
    if (family == hw::kFamilyCuda && req.min_cuda_version) {
      const auto cuda = version_of(d->cuda_driver_version);
      if (!cuda)
        return "needs CUDA >= " + req.min_cuda_version->to_string() + " but the driver's CUDA version on " +
               d->id + " is unknown";
      if (*cuda < *req.min_cuda_version)
        return "needs CUDA >= " + req.min_cuda_version->to_string() + ", the driver supports CUDA " +
               cuda->to_string();
    }
  }
  const bool split =
      req.strategy == model::Strategy::kPipeline || req.strategy == model::Strategy::kTensorParallel;
  const std::string strategy(model::strategy_name(req.strategy));
  if (split && !backend.capabilities().model_parallel)
    return "strategy '" + strategy + "' splits one model over devices, which " + std::string(backend.name()) +
           " cannot do (use pool, round-robin or data-parallel)";
  if (split && ids.size() < 2)
    return "strategy '" + strategy + "' needs at least two devices, got ids [" + join_ids(ids) + "]";
  return "";
}

}  // namespace

ProviderChoice check_candidates(const ProviderRequest& req, const hw::Registry& machine,
                                const Backend& backend, ProviderPolicy policy) {
  ProviderChoice choice;
  choice.policy = policy;
  auto add = [&](std::string_view name, const char* origin) {
    std::string p = canonical_provider(name);
    for (const auto& c : choice.candidates)
      if (c.provider == p) return;
    CandidateVerdict v;
    v.provider = p;
    v.origin = origin;
    choice.candidates.push_back(std::move(v));
  };
  if (req.preferred_provider) add(*req.preferred_provider, "manifest preferred");
  for (const auto& f : req.fallback_providers) add(f, "manifest fallback");
  if (policy != ProviderPolicy::kManifest) {
    for (const auto& p : backend.providers()) {  // the backend's own preference order
      const std::string_view family = backend.provider_family(p);
      if (family != hw::kFamilyCpu && !hw::family_devices(machine, family).empty()) add(p, "machine");
    }
    add("cpu", "default");
  } else if (choice.candidates.empty()) {
    add("cpu", "default");  // the manifest names no provider at all
  } else if (req.cpu_last_resort) {
    add("cpu", "last resort");  // kapsl's rule: a manifest naming only accelerators still loads on the CPU
  }

  const hw::Device* cpu = hw::find_device(machine, hw::kFamilyCpu, 0);
  const uint64_t host_mb = cpu ? cpu->memory_total_bytes.value_or(0) / kMiB : 0;
  for (auto& c : choice.candidates) {
    c.family = std::string(backend.provider_family(c.provider));
    Support avail = backend.provider_available(c.provider);
    if (!avail.ok) {
      c.reason = avail.reason;
      // kapsl runs `metal` as CoreML (and caps CoreML at its level 1); Gantry does not alias one provider to
      // another, so say what the name meant there.
      if (c.provider == "metal")
        c.reason =
            "metal is Apple's GPU API, which kapsl runs as CoreML capped at its level 1; name 'coreml' "
            "for that (Apple only): " +
            c.reason;
      continue;
    }
    if (req.min_memory_mb > 0 && host_mb > 0 && host_mb < req.min_memory_mb) {
      c.reason = "needs " + std::to_string(req.min_memory_mb) + " MB of host memory, this machine has " +
                 std::to_string(host_mb) + " MB";
      continue;
    }
    // ONNX Runtime runs a session on one device: a strategy that splits one model is refused on every
    // candidate, the CPU included (llama.cpp on a CPU simply has one device to put it on).
    const bool split =
        req.strategy == model::Strategy::kPipeline || req.strategy == model::Strategy::kTensorParallel;
    if (split && !backend.capabilities().model_parallel && !backend.capabilities().text_generation) {
      c.reason = "strategy '" + std::string(model::strategy_name(req.strategy)) +
                 "' splits one model over devices, which " + std::string(backend.name()) +
                 " cannot do (use pool, round-robin or data-parallel)";
      continue;
    }
    if (req.required_precision) {
      std::vector<int> ids = req.gpu_device_ids;
      if (ids.empty()) ids.push_back(req.device_id.value_or(0));
      const hw::Device* device =
          c.family == hw::kFamilyCpu ? cpu : hw::find_device(machine, c.family, ids.front());
      Support p = backend.precision_support(c.provider, *req.required_precision, device);
      if (!p.ok) {
        c.reason = "needs " + std::string(model::precision_name(*req.required_precision)) +
                   " precision: " + p.reason;
        continue;
      }
    }
    if (c.family == hw::kFamilyCpu) {
      c.viable = true;
      c.reason = avail.reason.empty() ? "runs on the host CPU" : avail.reason;
      continue;
    }
    std::vector<int> ids = req.gpu_device_ids;
    if (ids.empty()) ids.push_back(req.device_id.value_or(0));
    const hw::Device* first = hw::find_device(machine, c.family, ids.front());
    if (first) {
      Support s = backend.supports(*first);
      if (!s.ok) {
        c.reason = s.reason;
        continue;
      }
    }
    std::string why = check_devices(req, machine, c.family, ids, backend);
    if (!why.empty()) {
      c.reason = why;
      continue;
    }
    c.viable = true;
    c.device_ids = ids;
    c.reason = (avail.reason.empty() ? "" : avail.reason + "; ") + "device " + c.family + ":" + join_ids(ids);
  }
  for (size_t i = 0; i < choice.candidates.size(); ++i)
    if (choice.candidates[i].viable) {
      choice.chosen = static_cast<int>(i);
      break;
    }
  choice.placement = req.base;
  choice.placement.strategy = req.strategy;
  if (const auto* v = choice.chosen_verdict()) {
    choice.placement.provider = v->provider;
    choice.placement.device_ids = v->device_ids;
  }
  return choice;
}

std::string device_label(const hw::Registry& machine, std::string_view family, const std::vector<int>& ids) {
  std::string label(family);
  if (family == hw::kFamilyCpu) {
    if (const auto* d = hw::find_device(machine, family, 0); d && !d->name.empty()) label += " " + d->name;
    return label;
  }
  label += ":" + join_ids(ids);
  if (!ids.empty())
    if (const auto* d = hw::find_device(machine, family, ids.front()); d && !d->name.empty())
      label += " " + d->name;
  return label;
}

namespace {

std::string fnv1a_hex(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace

std::string VerdictCache::default_dir() {
  namespace fs = std::filesystem;
  if (const char* d = std::getenv("GANTRY_CACHE_DIR"); d && *d) return (fs::path(d) / "measured").string();
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d)
    return (fs::path(d) / "gantry" / "measured").string();
  if (const char* d = std::getenv("HOME"); d && *d)
    return (fs::path(d) / ".cache" / "gantry" / "measured").string();
  return (fs::temp_directory_path() / "gantry-cache" / "measured").string();
}

std::string VerdictCache::key(std::string_view model_sha256, std::string_view device,
                              std::string_view provider, std::string_view runtime_version) {
  std::string k;
  k.append(model_sha256)
      .append("|")
      .append(device)
      .append("|")
      .append(provider)
      .append("|")
      .append(runtime_version);
  return k;
}

std::optional<double> VerdictCache::get(const std::string& key) const {
  // The cache may live in a shared temp dir: read it like any untrusted file (no FIFO hangs, bounded).
  auto text = read_file(std::filesystem::path(dir_) / (fnv1a_hex(key) + ".json"), 64 << 10);
  if (!text.ok()) return std::nullopt;
  auto parsed = parse_json(*text, dir_);
  if (!parsed.ok()) return std::nullopt;  // a damaged file: measure again
  const nlohmann::json& j = *parsed;
  if (!j.is_object() || !j.contains("key") || !j["key"].is_string() || j["key"].get<std::string>() != key ||
      !j.contains("median_us") || !j["median_us"].is_number())
    return std::nullopt;  // another key with the same hash, or a damaged file: measure again
  return j["median_us"].get<double>();
}

Status VerdictCache::put(const std::string& key, double median_us) const {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return IoError("cannot create the verdict cache directory " + dir_ + ": " + ec.message());
  const fs::path final_path = fs::path(dir_) / (fnv1a_hex(key) + ".json");
  return write_file(final_path, nlohmann::json{{"key", key}, {"median_us", median_us}}.dump() + "\n");
}

void measure_candidates(ProviderChoice& choice, const hw::Registry& machine, const MeasureContext& ctx) {
  std::vector<size_t> viable;
  for (size_t i = 0; i < choice.candidates.size(); ++i)
    if (choice.candidates[i].viable) viable.push_back(i);
  if (viable.size() < (ctx.measure_single ? 1u : 2u) || !ctx.measure) return;
  const double per_candidate_ms = ctx.budget_ms / static_cast<double>(viable.size());
  double best = std::numeric_limits<double>::infinity();
  int best_index = -1;
  std::vector<size_t> failed;
  for (size_t i : viable) {
    auto& c = choice.candidates[i];
    Placement p = choice.placement;
    p.provider = c.provider;
    p.device_ids = c.device_ids;
    const std::string device = device_label(machine, c.family, c.device_ids);
    const std::string key = VerdictCache::key(ctx.model_sha256, device, c.provider, ctx.runtime_version);
    std::optional<double> median = ctx.cache ? ctx.cache->get(key) : std::nullopt;
    if (median) {
      c.from_cache = true;
    } else {
      auto m = ctx.measure(p, per_candidate_ms);
      if (!m.ok()) {
        c.viable = false;
        c.reason = "measurement failed: " + m.status().message();
        failed.push_back(i);
        continue;
      }
      median = *m;
      if (ctx.cache) {
        if (Status s = ctx.cache->put(key, *median); !s.ok())
          GANTRY_LOG_WARN("measured policy: {}", s.message());
      }
    }
    c.median_us = *median;
    if (*median < best) {
      best = *median;
      best_index = static_cast<int>(i);
    }
  }
  // When no candidate could be timed (e.g. inputs synthesised from metadata are not valid for this model),
  // the model still loads: fall back to the first viable candidate in policy order, and say so.
  if (best_index < 0 && failed.size() == viable.size() && !failed.empty()) {
    for (size_t i : failed) {
      choice.candidates[i].viable = true;
      choice.candidates[i].reason += " (kept in policy order: no candidate could be measured)";
    }
    best_index = static_cast<int>(failed.front());
  }
  choice.chosen = best_index;
  if (best_index >= 0) {
    choice.placement.provider = choice.candidates[best_index].provider;
    choice.placement.device_ids = choice.candidates[best_index].device_ids;
  } else {
    choice.placement.device_ids.clear();
  }
}

std::string ProviderChoice::explain() const {
  std::ostringstream out;
  out << "provider policy: " << provider_policy_name(policy) << "\n";
  for (size_t i = 0; i < candidates.size(); ++i) {
    const auto& c = candidates[i];
    out << "  " << (static_cast<int>(i) == chosen ? "* " : "  ") << c.provider << " (" << c.origin << "): "
        << (static_cast<int>(i) == chosen ? "chosen"
            : c.viable                    ? "viable"
                                          : "rejected")
        << " - " << c.reason;
    if (c.median_us) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "; median %.1f us%s", *c.median_us, c.from_cache ? " (cached)" : "");
      out << buf;
    }
    out << "\n";
  }
  if (chosen < 0) out << "  no viable provider\n";
  return out.str();
}

}  // namespace gantry::backend
