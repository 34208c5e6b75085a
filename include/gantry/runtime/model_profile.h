// Adapters that feed the planner: a GGUF file's tensor infos and metadata become a plan::ModelProfile, and
// the hardware registry's devices become plan::Device entries (the CPU with available host memory, GPUs with
// their free memory).
#pragma once

#include <filesystem>
#include <vector>

#include "gantry/backend/llama/gguf_profile.h"
#include "gantry/core/status.h"
#include "gantry/hw/registry.h"
#include "gantry/model/gguf.h"
#include "gantry/plan/model_profile.h"
#include "gantry/plan/planner.h"

namespace gantry::runtime {

// GGUF -> plan::ModelProfile; defined with the llama.cpp backend (gantry/backend/llama/gguf_profile.h).
using llama::profile_from_gguf;

// The registry's CPU (host memory: available, or the container limit when lower) and its GPUs with known
// memory.
std::vector<plan::Device> devices_from_registry(const hw::Registry& registry);

}  // namespace gantry::runtime
