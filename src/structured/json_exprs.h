// Exprs for the lexical pieces of JSON (RFC 8259): whitespace, string content, numbers,
// integer ranges, keys other than a given set, and string formats.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "structured/grammar.h"

namespace nanovllm::structured {

// [ \t\n\r]* (max_len < 0) or at most max_len of them.
ExprPtr json_ws(int max_len);
// One character of string content, any encoding JSON allows: unescaped, \" \\ \/ \b \f \n \r
// \t, or \uXXXX (not a lone surrogate).
ExprPtr json_string_char_any();
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
ExprPtr json_number();
// The decimal integers in [lo, hi] (absent = unbounded), without leading zeros or "-0".
ExprPtr json_integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi);
// The content (between quotes) of strings that are none of `names`: every string has one
// encoding here (json_char), so "differs" is decided on code points.
ExprPtr json_string_content_except(const std::vector<std::string>& names);
// The content of a string in a "format" (date, time, date-time, uuid, ipv4, email), or nullptr
// when the format is not supported.
ExprPtr json_format_content(const std::string& format);

}  // namespace nanovllm::structured
