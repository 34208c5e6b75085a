#include "gantry/backend/capabilities.h"

#include <algorithm>

namespace gantry::backend {

namespace {
template <typename T>
bool contains(const std::vector<T>& v, const T& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}
}  // namespace

std::vector<std::string> mismatches(const Capabilities& caps, const Requirements& req) {
  std::vector<std::string> out;
  if (!req.format.empty() && !contains(caps.formats, req.format)) {
    std::string have;
    for (const auto& f : caps.formats) have += (have.empty() ? "" : ", ") + f;
    out.push_back("does not load '" + req.format + "' models (loads: " + (have.empty() ? "none" : have) +
                  ")");
  }
  for (DType t : req.dtypes)
    if (!contains(caps.dtypes, t)) out.push_back("does not support dtype " + std::string(dtype_name(t)));
  if (!req.families.empty()) {
    bool any = false;
    for (const auto& f : req.families) any = any || contains(caps.families, f);
    if (!any) {
      std::string want;
      for (const auto& f : req.families) want += (want.empty() ? "" : "|") + f;
      out.push_back("cannot run on " + want + " devices");
    }
  }
  if (req.batch > 0 && caps.max_batch > 0 && req.batch > caps.max_batch)
    out.push_back("batch " + std::to_string(req.batch) + " exceeds its maximum of " +
                  std::to_string(caps.max_batch));
  if (req.dynamic_shapes && !caps.dynamic_shapes) out.push_back("does not accept dynamic shapes");
  if (req.streams && !caps.streams) out.push_back("cannot stream results");
  if (req.text_generation && !caps.text_generation) out.push_back("has no text-generation API");
  return out;
}

}  // namespace gantry::backend
