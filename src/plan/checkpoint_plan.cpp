#include "gantry/plan/checkpoint_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace gantry::plan {

Result<std::vector<FileType>> requested_file_types(const std::string& quant,
                                                   const ConvertedCheckpoint* converted) {
  std::string q = quant;
  std::transform(q.begin(), q.end(), q.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (q.empty()) {
    if (converted != nullptr) return std::vector<FileType>{converted->converted_type};
    return std::vector<FileType>{*file_type_by_name("bf16")};
  }
  if (q == "all") {
    std::vector<FileType> all;
    for (const auto& t : file_types())
      if (t.name != "f32") all.push_back(t);
    return all;
  }
  if (auto t = file_type_by_name(q)) return std::vector<FileType>{*t};
  return InvalidArgument(
      fmt::format("--quant {}: not a type llama-quantize writes without an importance "
                  "matrix ({}, or all)",
                  quant, file_type_names()));
}

Result<std::vector<QuantCandidate>> profile_candidates(const ConvertedCheckpoint& converted,
                                                       const std::vector<FileType>& types,
                                                       const std::string& name) {
  std::vector<QuantCandidate> out;
  for (const auto& t : types) {
    GANTRY_ASSIGN_OR_RETURN(auto profile,
                            profile_checkpoint(converted, t,
                                               name + " (" + converted.hparams.architecture + ", " +
                                                   std::to_string(converted.hparams.n_layer) + " layers, " +
                                                   std::string(t.name) + ")"));
    out.push_back({t, std::move(profile), {}, 0});
  }
  std::stable_sort(out.begin(), out.end(), [](const QuantCandidate& a, const QuantCandidate& b) {
    return a.profile.total_weight_bytes() > b.profile.total_weight_bytes();
  });
  return out;
}

Result<std::optional<size_t>> plan_candidates(std::vector<QuantCandidate>& candidates, PlanOptions options,
                                              bool ctx_given, const std::vector<Device>& devices) {
  const bool several = candidates.size() > 1;
  const uint32_t train = candidates.empty() ? 0 : candidates.front().profile.n_ctx_train;
  if (several && !ctx_given) options.n_ctx = std::min<uint32_t>(4096, train);
  std::optional<size_t> chosen;
  for (size_t i = 0; i < candidates.size(); ++i) {
    QuantCandidate& c = candidates[i];
    GANTRY_ASSIGN_OR_RETURN(c.plan, plan_gguf(c.profile, options, devices));
    c.max_context = 0;
    if (several && c.plan.fits) {
      auto mc = max_context(c.profile, options, devices, train > 0 ? train : kMaxContext);
      c.max_context = mc.ok() ? *mc : 0;
    }
    if (c.plan.fits && !chosen) chosen = i;
  }
  return chosen;
}

}  // namespace gantry::plan
