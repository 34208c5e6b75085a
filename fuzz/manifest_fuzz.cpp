// Fuzzes the gantry.json parser: any bytes must give a manifest or an error, and every accepted manifest
// must serialise to JSON that parses back to an equal manifest.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gantry/model/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto m = gantry::model::parse_manifest(text, "fuzz");
  if (!m.ok()) {
    if (m.status().message().empty()) std::abort();
    return 0;
  }
  auto again = gantry::model::parse_manifest(gantry::model::manifest_to_json(*m), "fuzz-round-trip");
  if (!again.ok() || !(*again == *m)) std::abort();
  return 0;
}
