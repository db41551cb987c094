// Regular expressions (the common subset of Python `re` and ECMA-262) to Exprs.
//
// Supported: literals, `.`, classes `[a-z]` / `[^...]`, \d \w \s and negations, \n \t \r \f \v
// \0 \xHH \uHHHH \UHHHHHHHH, escaped punctuation, groups `( )` `(?: )` `(?P<n> )` `(?<n> )`,
// `|`, quantifiers `* + ? {n} {n,} {,m} {n,m}` (lazy forms mean the same language), and `^` /
// `$` at the start / end of a top-level alternative. Anything else (backreferences,
// lookaround, \b, inline flags, \p{..}, possessive quantifiers) is a ConstraintError naming it.
//
// Shorthand classes generate only what both Python and ECMA-262 accept (codepoints.h).
#pragma once
#include <string_view>

#include "structured/grammar.h"

namespace nanovllm::structured {

struct RegexOptions {
  // The pattern constrains a JSON string's value: each character is emitted in its JSON
  // encoding (`"` as \", control characters escaped), for use between the quotes.
  bool json_string = false;
  // Search semantics (JSON Schema "pattern", Python re.search): an alternative without `^`
  // may be preceded by anything, one without `$` followed by anything. Otherwise the whole
  // text must match (vLLM's guided_regex, re.fullmatch); `^` and `$` are then no-ops.
  bool search = false;
};

ExprPtr regex_expr(std::string_view pattern, const RegexOptions& opt = {});

// One code point of `set` as it appears inside a JSON string: unescaped when allowed, else its
// single escape (\" \\ \b \f \n \r \t \u00XX). Each alternative decodes to one code point.
ExprPtr json_char(const CodepointSet& set);
// The JSON encoding of a string (with quotes), as nlohmann::json::dump writes it.
std::string json_quote(std::string_view utf8);

}  // namespace nanovllm::structured
