#include "weights/apply_hook.h"

namespace gantry::weights {

// Placeholder until the transformations (transform.h) are merged: refuses with the list.
Result<Weight> apply_transforms(Weight w, const std::vector<Transform>& ts) {
  if (ts.empty()) return w;
  std::string names;
  for (const auto& t : ts) names += (names.empty() ? "" : ", ") + std::to_string(t.index());
  return Unsupported(w.name + ": transformations are not available in this build");
}

}  // namespace gantry::weights
