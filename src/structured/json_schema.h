// JSON Schema -> Grammar. The grammar generates JSON text whose value validates against the
// schema (a subset of the valid documents: one property order, no duplicate declared keys,
// formats and classes restricted to what every validator accepts). Whatever the compiler cannot
// honour is a ConstraintError naming the keyword and its location, never silently ignored.
//
// Supported (drafts 4 to 2020-12 spellings):
//  - type (one or a list), enum, const, anyOf, oneOf (when its branches are evidently disjoint:
//    different types, or objects with different const values of a required property),
//    allOf with one schema, $ref to "#..." JSON pointers ($defs, definitions, recursion through
//    objects/arrays), nullable (OpenAPI), true / false schemas, annotations (title, ...).
//  - object: properties (generated in schema order), required, additionalProperties (false;
//    true / a schema: extra keys after the declared ones, never equal to a declared name;
//    absent: extra keys only when no properties are declared), unevaluatedProperties: false,
//    minProperties <= the required count, maxProperties when the count is fixed.
//  - array: items, prefixItems (or draft-7 items: [...] + additionalItems), minItems, maxItems,
//    uniqueItems: false (true only with maxItems <= 1).
//  - string: minLength / maxLength, pattern (search semantics, as validators apply it), format
//    date, time, date-time, uuid, ipv4, email; one of these families per string.
//  - integer: minimum, maximum, exclusiveMinimum, exclusiveMaximum (within int64).
//  - number, boolean, null (number bounds and multipleOf are not supported).
// Whitespace and digit runs are bounded (json_exprs.h) so that every output is finite.
#pragma once
#include <nlohmann/json.hpp>
#include <string_view>

#include "structured/grammar.h"
#include "structured/json_exprs.h"

namespace nanovllm::structured {

struct JsonSchemaOptions {
  // Whitespace between JSON tokens: nothing, one space, or a newline and at most max_indent
  // spaces / tabs; -1: none at all (disable_any_whitespace). The one default for every caller.
  int max_indent = kJsonMaxIndent;
  size_t max_states = 200000;   // automaton size limit (ConstraintError beyond it)
};

// Adds the rules for `schema` to `b`; returns the rule whose language is the instances' JSON.
int add_json_schema_rule(GrammarBuilder& b, const nlohmann::ordered_json& schema, const JsonSchemaOptions& opt);

Grammar json_schema_grammar(const nlohmann::ordered_json& schema, const JsonSchemaOptions& opt = {});
// Parses schema text keeping the properties' order (ConstraintError when it is not JSON).
nlohmann::ordered_json parse_json_schema(std::string_view schema_text);
// Any JSON object (response_format {"type": "json_object"}).
Grammar json_object_grammar(const JsonSchemaOptions& opt = {});

// A key escaped for a JSON pointer ("~" -> "~0", "/" -> "~1").
std::string json_pointer_token(const std::string& key);

}  // namespace nanovllm::structured
