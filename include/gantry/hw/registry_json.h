// JSON form of a Registry (schema/registry.schema.json). Unknown values are null.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "gantry/core/status.h"
#include "gantry/hw/registry.h"

namespace gantry::hw {

nlohmann::json registry_to_json(const Registry& registry);

// Corrupt when a field has the wrong type (the message names the field). A document whose schema_version is
// newer than kRegistrySchemaVersion is read as this schema with a warning (first in Registry::warnings):
// fields added since are ignored, a device this schema cannot describe is left out with a warning of its
// own, and the result's schema_version is kRegistrySchemaVersion. It is refused (Corrupt, saying it is newer)
// only when it lacks or retypes a field this schema needs.
Result<Registry> registry_from_json(const nlohmann::json& json);
Result<Registry> registry_from_json_text(const std::string& text);

}  // namespace gantry::hw
