// The factory: which provider runs a model, and why every other one was passed over.
//
// Candidates, in order: the manifest's preferred provider, then its fallbacks; policy `fastest`
// (the default) and `measured` then append the backend's accelerated providers (Backend::providers(),
// in the backend's order) whose device this machine has, and finally cpu (also when the manifest names
// accelerators only: kapsl appends the machine's accelerators only to an empty or CPU-only list, Gantry to
// every list, after the manifest's own candidates, so they never displace a viable provider the manifest
// names; they only keep `fastest` off the CPU when every named accelerator is missing here). Policy
// `manifest` uses what the manifest names, then the CPU as a last resort (origin "last resort", as kapsl
// does; the loader logs a warning when it is taken) unless the request says otherwise (an explicit
// `--provider` is strict). Each candidate is checked (hardware present, provider available in the backend,
// VRAM, CUDA version, required precision, device ids / strategy); `fastest` and `manifest` take the first
// viable one, `measured` times every viable one on the real model and takes the fastest (cached on disk).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/backend/backend.h"
#include "gantry/backend/placement.h"
#include "gantry/core/status.h"
#include "gantry/core/version.h"
#include "gantry/hw/registry.h"
#include "gantry/model/manifest.h"

namespace gantry::backend {

enum class ProviderPolicy { kFastest, kManifest, kMeasured };

std::string_view provider_policy_name(ProviderPolicy p);
Result<ProviderPolicy> parse_provider_policy(std::string_view text);
// `flag` when not empty (an unknown value is an InvalidArgument error: a typo on a command line is caught at
// once), else $GANTRY_PROVIDER_POLICY when set (an unknown value is logged as a warning and taken as
// kFastest, as kapsl does: a machine-wide setting must not stop every command), else kFastest.
Result<ProviderPolicy> resolve_provider_policy(std::string_view flag);

// Canonical provider name: lower case, ORT names mapped ("CUDAExecutionProvider" -> "cuda").
std::string canonical_provider(std::string_view name);

// What the factory needs from a model's manifest (hardware_requirements), as plain data.
struct ProviderRequest {
  std::string model_name;
  std::optional<std::string> preferred_provider;
  std::vector<std::string> fallback_providers;
  uint64_t min_memory_mb = 0;
  uint64_t min_vram_mb = 0;
  std::optional<Version> min_cuda_version;
  std::optional<int> device_id;
  std::vector<int> gpu_device_ids;
  std::optional<model::Precision> required_precision;  // checked with Backend::precision_support
  model::Strategy strategy = model::Strategy::kAuto;
  // Policy `manifest`: add the CPU after the providers the manifest names when it does not name it (kapsl's
  // last-resort CPU). False for a provider the user named explicitly (`--provider cuda` must not run on the
  // CPU).
  bool cpu_last_resort = true;
  Placement base;  // threads, graph optimisation, session options from the manifest; provider and devices are
                   // chosen here
};

struct CandidateVerdict {
  std::string provider;
  std::string origin;  // "manifest preferred", "manifest fallback", "machine", "default", "last resort"
  bool viable = false;
  std::string reason;          // why rejected, or what makes it viable ("CPU EP built in")
  std::string family = "cpu";  // the device family it runs on (hw::kFamily*)
  std::vector<int> device_ids;
  std::optional<double> median_us;  // measured policy only
  bool from_cache = false;          // the median came from the verdict cache
};

struct ProviderChoice {
  ProviderPolicy policy = ProviderPolicy::kFastest;
  std::vector<CandidateVerdict> candidates;  // every candidate considered, in order
  int chosen = -1;                           // index into candidates; -1: none viable
  Placement placement;                       // base with the chosen provider and devices

  const CandidateVerdict* chosen_verdict() const { return chosen < 0 ? nullptr : &candidates[chosen]; }
  // A multi-line explanation: one line per candidate with its verdict and reason.
  std::string explain() const;
};

// Builds and checks the candidate list (no measuring). `chosen` is the first viable candidate.
ProviderChoice check_candidates(const ProviderRequest& req, const hw::Registry& machine,
                                const Backend& backend, ProviderPolicy policy);

// Times a few warm inferences of the real model under `placement`, spending at most about
// `budget_ms` on the timed runs; returns the median in µs.
using MeasureFn = std::function<Result<double>(const Placement& placement, double budget_ms)>;

// Disk cache of measured verdicts, one small JSON file per key, in `dir`.
class VerdictCache {
 public:
  // $GANTRY_CACHE_DIR, else $XDG_CACHE_HOME/gantry, else ~/.cache/gantry; then "/measured".
  static std::string default_dir();
  explicit VerdictCache(std::string dir) : dir_(std::move(dir)) {}

  // Key of one measurement: model sha256, device, provider and runtime version.
  static std::string key(std::string_view model_sha256, std::string_view device, std::string_view provider,
                         std::string_view runtime_version);
  std::optional<double> get(const std::string& key) const;
  Status put(const std::string& key, double median_us) const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

struct MeasureContext {
  std::string model_sha256;
  std::string runtime_version;          // e.g. ORT "1.29.0"
  const VerdictCache* cache = nullptr;  // null: no caching
  MeasureFn measure;
  double budget_ms = 2000;      // for all candidates of one model together
  bool measure_single = false;  // also time a lone viable candidate (to report its median)
};

// Policy `measured`: when more than one candidate is viable, measures each (or reads the cache) and
// chooses the fastest; a candidate whose measurement fails becomes non-viable with that reason.
// With one viable candidate it is chosen unmeasured.
void measure_candidates(ProviderChoice& choice, const hw::Registry& machine, const MeasureContext& ctx);

// Device label used in cache keys and explanations: "cpu AMD EPYC 7B13", "cuda:0 NVIDIA H100".
std::string device_label(const hw::Registry& machine, std::string_view family, const std::vector<int>& ids);

}  // namespace gantry::backend
