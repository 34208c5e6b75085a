// JSON and text renderings of a Plan (the `gantry plan` output). Keys: model, estimate, context {...},
// devices[] {id, name, layers, output_layer, predicted_bytes {weights, kv_cache, compute, output, total},
// free_bytes, fits}, totals {...}, fits, suggestion, notes. Callers may add keys (e.g. measured_bytes).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "gantry/plan/planner.h"

namespace gantry::plan {

nlohmann::json memory_to_json(const MemoryBytes& m);
nlohmann::json plan_to_json(const Plan& plan);
std::string plan_to_text(const Plan& plan);

// "1.50 GiB", "12.3 MiB", "512 B".
std::string human_bytes(uint64_t bytes);

}  // namespace gantry::plan
