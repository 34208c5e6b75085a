// A checkpoint planned at the quantisations `gantry plan CHECKPOINT --quant TYPE|all` asks for: the profile
// of the GGUF llama-quantize would write at each type (checkpoint.h), then the exact planner on each, and
// the largest type that fits with the context it leaves.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/plan/checkpoint.h"
#include "gantry/plan/model_profile.h"
#include "gantry/plan/planner.h"
#include "gantry/plan/quantiser.h"

namespace gantry::plan {

// The file types `quant` names (case-insensitive): "" the converted type (bf16 when there is no conversion:
// an architecture not planned, whose weights alone are reported); "all" every type llama-quantize writes
// without an importance matrix except f32, largest first; else that one type. InvalidArgument
// ("--quant X: not a type llama-quantize writes ...") for anything else.
Result<std::vector<FileType>> requested_file_types(const std::string& quant,
                                                   const ConvertedCheckpoint* converted);

// One type's profile and, once planned, its plan.
struct QuantCandidate {
  FileType type;
  ModelProfile profile;
  Plan plan;
  uint32_t max_context = 0;  // set by plan_candidates when there are several and this one fits
};

// The profile of `converted` at each of `types`, named "NAME (ARCH, N layers, TYPE)", largest first by the
// bytes llama.cpp would hold (the nominal order is not exact for small models; ties keep `types`' order).
// Errors: profile_checkpoint's.
Result<std::vector<QuantCandidate>> profile_candidates(const ConvertedCheckpoint& converted,
                                                       const std::vector<FileType>& types,
                                                       const std::string& name);

// Plans every candidate in place at `options` on `devices`. With several candidates, a type "fits" when it
// fits at the context asked for (when none was, `ctx_given` false: 4096 tokens, or the training context when
// shorter), and each that fits gets the largest context it leaves (up to the training context). Returns the
// index of the first (largest) that fits; nullopt when none does. Errors: plan_gguf's.
Result<std::optional<size_t>> plan_candidates(std::vector<QuantCandidate>& candidates, PlanOptions options,
                                              bool ctx_given, const std::vector<Device>& devices);

}  // namespace gantry::plan
