// Synthesised inputs for a model: what the measured policy and `gantry plan --explain` feed a model
// when timing it. Dynamic dims are 1 unless a session bucket fixes them; values are zeros ("" for strings).
#pragma once

#include <vector>

#include "gantry/backend/model.h"
#include "gantry/backend/placement.h"

namespace gantry::backend {

Result<std::vector<NamedTensor>> synthesize_inputs(const ModelMetadata& metadata,
                                                   const model::SessionBucket* bucket = nullptr);

// Runs `warmup` untimed inferences, then timed ones until `budget_ms` is spent (at least `min_runs`,
// at most `max_runs`); returns the median in µs.
Result<double> time_inferences(Model& model, std::span<const NamedTensor> inputs, double budget_ms,
                               int warmup = 2, int min_runs = 3, int max_runs = 50);

}  // namespace gantry::backend
