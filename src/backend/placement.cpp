#include "gantry/backend/placement.h"

#include <algorithm>
#include <cctype>

namespace gantry::backend {

std::string_view graph_optimization_name(GraphOptimization level) {
  switch (level) {
    case GraphOptimization::kDisable:
      return "disable";
    case GraphOptimization::kBasic:
      return "basic";
    case GraphOptimization::kExtended:
      return "extended";
    case GraphOptimization::kAll:
      return "all";
  }
  return "all";
}

Result<GraphOptimization> parse_graph_optimization(std::string_view text) {
  std::string t(text);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (t == "disable" || t == "0") return GraphOptimization::kDisable;
  if (t == "basic" || t == "1") return GraphOptimization::kBasic;
  if (t == "extended" || t == "2" || t == "3") return GraphOptimization::kExtended;
  if (t == "all" || t == "99") return GraphOptimization::kAll;
  return InvalidArgument("graph optimisation level '" + std::string(text) +
                         "' is not one of disable|basic|extended|all or 0|1|2|3|99");
}

}  // namespace gantry::backend
