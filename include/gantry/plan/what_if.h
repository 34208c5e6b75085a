// `gantry plan MODEL --what-if TARGETS`: the exact planner and the speed model run against catalogue
// hardware (gantry/plan/catalogue.h) and this machine. For each target: whether the model fits at the
// requested context/parallelism, the quantisation it needs to fit, the layer split, predicted tokens/s and
// $ per million generated tokens. Plain functions over plain data; "this" machine is gantry/plan/machine.h's.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/plan/catalogue.h"
#include "gantry/plan/model_profile.h"
#include "gantry/plan/planner.h"
#include "gantry/plan/speed.h"

namespace gantry::plan {

// GPU memory the planner leaves for the CUDA/ROCm context and driver (not given to llama.cpp).
inline constexpr uint64_t kGpuReserveBytes = 512ull << 20;

struct WhatIfTarget {
  std::string id;                   // "h100-80gb", "8xa100-80gb", "aws-p5.48xlarge", "this"
  std::string description;          // "1 x NVIDIA H100 80GB SXM5", ...
  std::vector<Device> devices;      // the host CPU first, then GPUs
  std::vector<DeviceSpeed> speeds;  // one per device
  double storage_bytes_per_s = 0;
  std::string interconnect;
  std::optional<double> price_usd_per_hour;
  std::string price_date, price_source, price_note;
};

// Resolves a comma-separated list: "all" (every accelerator once, every instance, and `this_machine` when
// given), "this", an instance id, or "[N x]accelerator-id" ("8xa100-80gb"). A bare accelerator runs on a
// host with twice its memory and costs N x the per-GPU price of the cheapest catalogue instance with that
// accelerator (said so in its price note). Unknown ids are an error listing the known ones.
Result<std::vector<WhatIfTarget>> resolve_targets(const Catalogue& catalogue, std::string_view spec,
                                                  const std::optional<WhatIfTarget>& this_machine);
// Whether `spec` may name this machine ("this" or "all" anywhere in it, any case): whether to time it
// (gantry/plan/machine.h) before resolving.
bool names_this_machine(std::string_view spec);

// Nominal bits per weight of llama.cpp's quantisations, largest first (as the planner's suggestion uses).
struct Quantisation {
  const char* name;
  double bits_per_weight;
};
const std::vector<Quantisation>& quantisations();
// The model with every weight scaled from its current bits per weight to `bpw` (file size too).
ModelProfile requantised(const ModelProfile& model, double bpw);

struct WhatIfResult {
  WhatIfTarget target;
  bool fits = false;
  std::string quantisation;   // "as-is" or the largest quantisation that fits ("Q4_K_M"); "" when none does
  uint64_t weight_bytes = 0;  // of the (re)quantised model
  Plan plan;                  // of the model as-is, or at `quantisation`; at Q2_K when nothing fits
  SpeedPrediction speed;      // known only when it fits
  std::optional<double> usd_per_million_tokens;
  std::string missing;       // when it does not fit: what is missing, per device
  uint32_t max_context = 0;  // when it fits: the largest context that still fits (up to the training context)
};

// Plans `model` on one target with every layer offloaded to its GPUs (n_gpu_layers = -1).
Result<WhatIfResult> evaluate_target(const ModelProfile& model, const PlanOptions& options,
                                     const WhatIfTarget& target);

// A model known exactly at several quantisations (a checkpoint planned at each type), largest first.
struct QuantisedProfile {
  std::string quantisation;  // "q8_0", ...
  ModelProfile profile;
};
// As above, but the quantisation is the first candidate that fits (exact sizes, no bits-per-weight scaling);
// when none does, the plan and shortfall are the last (smallest) candidate's. `candidates` is not empty.
Result<WhatIfResult> evaluate_target(const std::vector<QuantisedProfile>& candidates,
                                     const PlanOptions& options, const WhatIfTarget& target);

struct WhatIfReport {
  std::string model;
  std::string catalogue_path, catalogue_version;
  std::vector<WhatIfResult>
      results;          // fitting targets by $ per million tokens (unpriced after), then the rest
  std::string missing;  // when nothing fits: the closest target and what it lacks
};

// Evaluates and sorts. Fails only on invalid options (as plan_gguf does).
Result<WhatIfReport> what_if(const ModelProfile& model, const PlanOptions& options,
                             const Catalogue& catalogue, const std::vector<WhatIfTarget>& targets);
// The same for a model known at several quantisations (reported under the first candidate's name).
Result<WhatIfReport> what_if(const std::vector<QuantisedProfile>& candidates, const PlanOptions& options,
                             const Catalogue& catalogue, const std::vector<WhatIfTarget>& targets);

nlohmann::json speed_to_json(const SpeedPrediction& s);
std::string speed_to_text(const SpeedPrediction& s);
nlohmann::json what_if_to_json(const WhatIfReport& r);
std::string what_if_to_text(const WhatIfReport& r);

}  // namespace gantry::plan
