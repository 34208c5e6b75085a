// GBNF grammars (llama.cpp's grammar format, start rule "root") for JSON output constraints.
//
// Our own converter (llama.cpp's lives in its `common` library, which we do not build). Supported
// JSON Schema subset:
//   type (a name or an array of names: object, array, string, number, integer, boolean, null),
//   properties + required (required properties first, in `required` order; then the optional ones,
//   each may be left out, in `properties` order), additionalProperties (false or true: extra keys
//   are never generated, which every schema allows), items, enum, const, anyOf,
//   minLength/maxLength (strings), $ref to "#/$defs/<name>" or "#/definitions/<name>".
//   Annotations (title, description, default, examples, $schema, $id, $comment) are ignored.
// Any other keyword is refused with InvalidArgument naming it, since silently ignoring it would
// produce output the caller's schema rejects.
//
// Whitespace between tokens is bounded (at most a newline and 8 spaces) and numbers have at most
// 16 integer and 16 fraction digits, so a model cannot stall in an endless run of them.
#pragma once

#include <string>
#include <string_view>

#include "gantry/backend/generation.h"
#include "gantry/core/status.h"

namespace gantry::llama {

// A grammar accepting exactly one JSON object (any keys and values).
std::string json_object_grammar();

// A grammar accepting JSON values valid against `schema_json` (the subset above).
// InvalidArgument when the schema is not JSON, not an object/boolean, or uses an unsupported keyword
// (the message names the keyword and where it is, as a JSON pointer).
Result<std::string> json_schema_grammar(std::string_view schema_json);

// The grammar for `c`, or "" for kNone.
Result<std::string> grammar_for(const backend::OutputConstraint& c);

}  // namespace gantry::llama
