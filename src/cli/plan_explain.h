// `gantry plan MODEL --explain [--json]`: which provider the factory picks for MODEL and why every other
// candidate was passed over (with measured medians under the `measured` policy).
#pragma once

#include <ostream>
#include <string>

namespace gantry::cli {

// Prints the explanation to `out`; errors go to stderr. Returns the exit code (0, 1 runtime failure,
// 2 bad policy). `provider_policy` empty: $GANTRY_PROVIDER_POLICY or "fastest".
int run_plan_explain(const std::string& model, bool json, const std::string& provider_policy,
                     std::ostream& out);

}  // namespace gantry::cli
