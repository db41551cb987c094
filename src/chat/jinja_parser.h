// Recursive-descent Jinja parser following jinja2's grammar and operator precedence:
//   condexpr > or > and > not > compare (== != < > <= >= in, not in) > + - > ~ > * / // % > ** >
//   unary -/+ > primary with postfix (.x [i] [a:b] (...)) followed by filters (|f) and tests (is t).
#pragma once
#include <string>

#include "chat/jinja_ast.h"

namespace nanovllm::jinja {

// Parses a whole template. Throws nanovllm::Error "chat template syntax error at line N: ..." for
// syntax errors and unsupported tags.
Body parse_template(const std::string& source);

}  // namespace nanovllm::jinja
