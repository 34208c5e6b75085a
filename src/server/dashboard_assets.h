// The dashboard's static files (src/server/dashboard/*), compiled into the binary by
// cmake/EmbedAssets.cmake: served at / (index.html) and /dashboard/<name>, never read from disk.
#pragma once

#include <span>
#include <string_view>

namespace gantry::server {

struct EmbeddedAsset {
  std::string_view name;          // "app.js"
  std::string_view content_type;  // "text/javascript; charset=utf-8"
  std::string_view etag;          // quoted: "\"<first 32 hex digits of the SHA-256>\""
  std::string_view bytes;
};

// Every asset, by name (generated).
std::span<const EmbeddedAsset> embedded_dashboard_assets();

// The asset called `name`, or nullptr. Names are plain file names: anything with a '/' or starting
// with '.' is never found.
const EmbeddedAsset* find_dashboard_asset(std::string_view name);

// The headers every dashboard page and asset carries: a strict Content-Security-Policy (scripts,
// styles and fetches only from this origin, no inline code, no framing), nosniff, no referrer.
inline constexpr std::string_view kDashboardCsp =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

}  // namespace gantry::server
