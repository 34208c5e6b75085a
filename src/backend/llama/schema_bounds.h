// The checks a JSON schema passes before llama.cpp's json_schema_to_grammar converts it
// (gantry/backend/llama/json_grammar.h says which limits and which subset, and why).
#pragma once

#include <nlohmann/json.hpp>

#include "gantry/core/status.h"

namespace gantry::llama {

// OK when `schema` may go to llama.cpp's converter: within the size limits of json_grammar.h (its shape,
// its subschemas, alternatives, enum values, repetitions, names and the grammar text it must at least
// make), and using only what that converter applies. A keyword it would ignore, or apply in a way that
// lets through values the schema rejects, is InvalidArgument naming it and where it is (a JSON pointer).
//
// Rewrites, in place, forms that mean the same but llama.cpp cannot take: a subschema `true` becomes {},
// and "additionalProperties": true goes (extra keys are allowed then anyway; llama.cpp would generate
// them under a key rule of its own making).
Status check_schema(nlohmann::ordered_json& schema);

}  // namespace gantry::llama
