// Exprs for the lexical pieces of JSON (RFC 8259): whitespace, string content, numbers,
// integer ranges, keys other than a given set, and string formats.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "structured/grammar.h"

namespace nanovllm::structured {

// Bounds that keep a weak model's JSON finite (README.md, "Whitespace and numbers").
// Whitespace between two tokens: nothing, one space, or a newline and at most this many
// spaces / tabs (pretty-printed JSON up to 10 levels of 2-space indentation).
inline constexpr int kJsonMaxIndent = 20;
// Integer part: at most 15 digits, so every unbounded schema integer is below 2^53 and exact
// in a double (JavaScript clients). Fraction: at most 16 digits and exponent at most 2: every
// double of magnitude 1e-99 to 1e99 has a text (d.ddddddddddddddddE±dd, 17 significant
// digits), and no generated number overflows or underflows a double (all below 1e115).
inline constexpr int kJsonMaxIntDigits = 15;
inline constexpr int kJsonMaxFracDigits = 16;
inline constexpr int kJsonMaxExpDigits = 2;

// The whitespace allowed between two JSON tokens: "", " ", or "\n" followed by at most
// max_indent of [ \t]; max_indent < 0: only "" (compact JSON).
ExprPtr json_ws(int max_indent);
// One character of string content, any encoding JSON allows: unescaped, \" \\ \/ \b \f \n \r
// \t, or \uXXXX (not a lone surrogate).
ExprPtr json_string_char_any();
// -?(0|[1-9][0-9]{0,14})(\.[0-9]{1,16})?([eE][+-]?[0-9]{1,2})?: JSON numbers within the
// digit bounds above.
ExprPtr json_number();
// The decimal integers in [lo, hi] without leading zeros or "-0". An absent bound is unbounded
// up to kJsonMaxIntDigits digits (or the other bound's digit count, when that is more).
ExprPtr json_integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi);
// The content (between quotes) of strings that are none of `names`: every string has one
// encoding here (json_char), so "differs" is decided on code points.
ExprPtr json_string_content_except(const std::vector<std::string>& names);
// The content of a string in a "format" (date, time, date-time, uuid, ipv4, email), or nullptr
// when the format is not supported.
ExprPtr json_format_content(const std::string& format);

}  // namespace nanovllm::structured
