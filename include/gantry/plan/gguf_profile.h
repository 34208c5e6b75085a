// Inputs for the planner: a GGUF file's tensor infos and metadata become a ModelProfile, and
// the hardware registry's devices become Device entries (the CPU with available host memory, GPUs with
// their free memory).
#pragma once

#include <filesystem>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/hw/registry.h"
#include "gantry/model/gguf.h"
#include "gantry/plan/model_profile.h"
#include "gantry/plan/planner.h"

namespace gantry::plan {

// Reads `<arch>.block_count`, head counts (scalar or per-layer arrays), key/value lengths, feed-forward
// length, sliding window, training context, vocabulary size; sums tensor bytes per layer ("blk.N."), input
// ("token_embd") and output ("output", "output_norm"). Fails with kInvalidArgument naming the missing field.
Result<ModelProfile> profile_from_gguf(const model::GgufFile& file);
Result<ModelProfile> profile_from_gguf(const std::filesystem::path& path);

// The registry's CPU (host memory: available, or the container limit when lower) and its GPUs with known
// memory.
std::vector<Device> devices_from_registry(const hw::Registry& registry);

}  // namespace gantry::plan
