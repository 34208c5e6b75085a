// JSON form of a Registry (schema/registry.schema.json). Unknown values are null.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "gantry/core/status.h"
#include "gantry/hw/registry.h"

namespace gantry::hw {

nlohmann::json registry_to_json(const Registry& registry);

// Unsupported when `schema_version` is newer than kRegistrySchemaVersion; Corrupt when a field has
// the wrong type (the message names the field).
Result<Registry> registry_from_json(const nlohmann::json& json);
Result<Registry> registry_from_json_text(const std::string& text);

}  // namespace gantry::hw
