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
//
// Size: a schema is compiled to a grammar on the request's thread, and llama.cpp then applies the grammar
// to the whole vocabulary at every generated token, on the decoding thread every sequence shares: a
// grammar offering thousands of alternatives at one point slows every decode step of the engine. So a
// schema is bounded (InvalidArgument "the JSON schema is too large: ... (at most N; ...)"). At these
// limits the largest schemas compile in milliseconds, and the widest costs a sequence decoding next to
// it less per token than a plain json_object constraint does (bench/schema_grammar_bench.cpp).
// Nesting is bounded by kMaxJsonDepth (gantry/core/json.h) when the schema is parsed.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "gantry/backend/generation.h"
#include "gantry/core/status.h"

namespace gantry::llama {

// Subschemas in one schema: each property, items, anyOf branch, type-array entry and $ref'd definition.
inline constexpr size_t kMaxSchemaNodes = 1024;
// Alternatives at one point of the output: the optional properties of one object, the values of one
// enum, the branches of one anyOf (nested enums and anyOfs counted in). Each is a grammar stack that
// llama.cpp checks against the whole vocabulary at every step the sequence spends there.
inline constexpr size_t kMaxSchemaAlternatives = 128;
// Enum values, all of the schema's enums together.
inline constexpr size_t kMaxSchemaEnumValues = 1024;
// Object members (keywords, properties, and inside annotations), all objects together; one object may
// have at most kMaxSchemaNodes. The schema is parsed as ordered_json (to keep `properties` in order),
// whose parse is quadratic in an object's members: 20,000 properties took half a second just to parse.
inline constexpr size_t kMaxSchemaMembers = 16384;
// minLength and maxLength: llama.cpp's grammar repeats an item at most 2000 times (MAX_REPETITION_THRESHOLD;
// a larger minimum is an error there, a larger maximum silently becomes unbounded).
inline constexpr int64_t kMaxSchemaRepetition = 2000;
// The grammar text (long names, enum values and consts make it large).
inline constexpr size_t kMaxGrammarBytes = size_t{256} << 10;

// A grammar accepting exactly one JSON object (any keys and values).
std::string json_object_grammar();

// A grammar accepting JSON values valid against `schema_json` (the subset above).
// InvalidArgument when the schema is not JSON, not an object/boolean, or uses an unsupported keyword
// (the message names the keyword and where it is, as a JSON pointer).
Result<std::string> json_schema_grammar(std::string_view schema_json);

// The grammar for `c`, or "" for kNone.
Result<std::string> grammar_for(const backend::OutputConstraint& c);

}  // namespace gantry::llama
