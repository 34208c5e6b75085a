// The loader's one call into the transformations (internal to src/weights).
#pragma once

#include <vector>

#include "gantry/weights/transform.h"

namespace gantry::weights {

Result<Weight> apply_transforms(Weight w, const std::vector<Transform>& ts);

}  // namespace gantry::weights
