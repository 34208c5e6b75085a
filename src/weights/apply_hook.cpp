#include "weights/apply_hook.h"

namespace gantry::weights {

Result<Weight> apply_transforms(Weight w, const std::vector<Transform>& ts) {
  if (ts.empty()) return w;
  return apply_all(std::move(w), ts);
}

}  // namespace gantry::weights
