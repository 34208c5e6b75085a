// Checks shared by the writers.
#pragma once

#include <string>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/weights/weight.h"

namespace gantry::weights::detail {

// The bytes a weight's data must hold: element count x element size, or whole blocks for a ggml type.
Result<uint64_t> expected_bytes(const Weight& w);

// Every weight has a unique non-empty name, host data of exactly expected_bytes(). `format` names the
// file kind in messages ("safetensors").
Status check_weights(const std::vector<Weight>& weights, std::string_view format);

}  // namespace gantry::weights::detail
