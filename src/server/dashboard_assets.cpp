#include "server/dashboard_assets.h"

namespace gantry::server {

const EmbeddedAsset* find_dashboard_asset(std::string_view name) {
  if (name.empty() || name.front() == '.' || name.find('/') != std::string_view::npos) return nullptr;
  for (const auto& a : embedded_dashboard_assets()) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

}  // namespace gantry::server
