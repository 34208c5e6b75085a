// GBNF grammars (llama.cpp's grammar format, start rule "root") for JSON output constraints.
//
// One converter: llama.cpp's json_schema_to_grammar (its `common` library, which the backend links
// privately), the same that builds the grammar of a tool call. Every schema goes through it: a
// response_format json_schema, json_object (the schema {"type":"object"}), Ollama's `format`, and the
// parameter schemas of tools (checked here before llama.cpp's chat layer turns them into its grammar).
//
// Before it runs, the schema passes our checks (src/backend/llama/schema_bounds.*): llama.cpp's converter
// has no bounds of its own, and it ignores keywords it does not support, so its grammar would let through
// values the schema rejects. Supported subset (what llama.cpp applies exactly):
//   type (a name or an array of distinct names: object, array, string, number, integer, boolean, null),
//   enum, const, anyOf, $ref to "#/$defs/<name>" or "#/definitions/<name>" of the root;
//   objects: properties, required (properties named in it), additionalProperties true or false (extra
//     keys are never generated, which every schema allows);
//   arrays: items (a schema), prefixItems or an items array (a tuple: exactly its items), minItems, maxItems;
//   strings: minLength, maxLength, format date, time, date-time or uuid (without minLength/maxLength);
//   integers: minimum, maximum, exclusiveMinimum, exclusiveMaximum (within +-1e15).
//   Annotations (title, description, default, examples, deprecated, readOnly, writeOnly, $schema, $id,
//   $comment) are ignored, and so is a keyword for values of a type the subschema cannot produce
//   (minItems next to "type": "string").
// Any other keyword (pattern, allOf, oneOf, not, minimum of a number, ...) is refused with InvalidArgument
// naming it and where it is, as a JSON pointer; so is $ref or anyOf next to a constraint, since llama.cpp
// would apply only the $ref or the anyOf. If llama.cpp's converter still throws, its message comes back as
// an InvalidArgument ("llama.cpp could not convert the JSON schema: ...").
//
// Whitespace between tokens is bounded (llama.cpp's `space`: at most 2 newlines and 20 spaces or tabs) and
// numbers have at most 16 integer and 16 fraction digits, so a model cannot stall in an endless run of them.
//
// Size: a schema is compiled to a grammar on the request's thread, and llama.cpp then applies the grammar
// to the whole vocabulary at every generated token, on the decoding thread every sequence shares: a
// grammar offering thousands of alternatives at one point slows every decode step of the engine. So a
// schema is bounded (InvalidArgument "the JSON schema is too large: ... (at most N; ...)") before
// llama.cpp's converter sees it. At these limits the largest schemas compile in tens of milliseconds at most,
// and the widest costs a sequence decoding next to it less per token than a plain json_object constraint does
// (bench/schema_grammar_bench.cpp). Nesting is bounded by kMaxJsonDepth (gantry/core/json.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "gantry/backend/generation.h"
#include "gantry/core/status.h"

namespace gantry::llama {

// Subschemas in one schema: each property, items, tuple item, anyOf branch, type-array entry and $ref'd
// definition.
inline constexpr size_t kMaxSchemaNodes = 1024;
// Alternatives at one point of the output: the optional properties of one object, the values of one
// enum, the branches of one anyOf or entries of one type array (nested enums and anyOfs counted in).
// Each is a grammar stack that llama.cpp checks against the whole vocabulary at every step the sequence
// spends there.
inline constexpr size_t kMaxSchemaAlternatives = 128;
// Enum values, all of the schema's enums together.
inline constexpr size_t kMaxSchemaEnumValues = 1024;
// Object members (keywords, properties, and inside annotations), all objects together; one object may
// have at most kMaxSchemaNodes. The schema is parsed as ordered_json (to keep `properties` in order), and
// so is it again by llama.cpp: its parse is quadratic in an object's members (20,000 properties took half
// a second just to parse).
inline constexpr size_t kMaxSchemaMembers = 16384;
// minLength, maxLength, minItems and maxItems: llama.cpp's grammar repeats an item at most 2000 times
// (MAX_REPETITION_THRESHOLD; a larger minimum is an error there, a larger maximum silently becomes
// unbounded).
inline constexpr int64_t kMaxSchemaRepetition = 2000;
// The schema's JSON text.
inline constexpr size_t kMaxSchemaBytes = size_t{1} << 20;
// llama.cpp names the grammar rule of a subschema after the property names (and the $defs name) on the
// way to it, and rewrites each name with a std::regex (libstdc++'s recurses once per character of a run
// it replaces): the names along one way may take this many bytes.
inline constexpr size_t kMaxSchemaNameBytes = 1024;
// llama.cpp's converter builds the rules of an object's optional properties in time growing with the
// square of their number (each refers to the rules of those after it, and each of those rules is named
// anew: the object's rule name and a property's, through a std::regex): n optional properties cost
// n^2 x (the object's rule name + the longest of their names + 32), all objects together at most this
// (128 optional properties with names of 32 bytes; 128 with 1,000-byte names took 0.2 s).
inline constexpr size_t kMaxSchemaOptionalWork = size_t{1} << 20;
// The grammar text (long names, enum values and consts make it large).
inline constexpr size_t kMaxGrammarBytes = size_t{256} << 10;

// A grammar accepting exactly one JSON object (any keys and values): llama.cpp's for {"type":"object"}.
Result<std::string> json_object_grammar();

// A grammar accepting JSON values valid against `schema` (the subset above), from llama.cpp's converter
// after our checks. InvalidArgument when the schema is not an object/boolean, is beyond the limits, or
// uses an unsupported keyword (the message names the keyword and where it is, as a JSON pointer).
Result<std::string> schema_grammar(const nlohmann::ordered_json& schema);

// schema_grammar of `schema_json` parsed as a client's JSON (depth and members bounded first);
// InvalidArgument "the JSON schema: not valid JSON: ..." when it is not JSON.
Result<std::string> json_schema_grammar(std::string_view schema_json);

// The grammar for `c`, or "" for kNone.
Result<std::string> grammar_for(const backend::OutputConstraint& c);

namespace detail {
// llama.cpp's converter alone, without our checks, its exceptions turned into InvalidArgument (tests).
Result<std::string> llama_cpp_schema_grammar(const nlohmann::ordered_json& schema);
}  // namespace detail

}  // namespace gantry::llama
