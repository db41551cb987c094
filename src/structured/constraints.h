// Front door: grammars for the request-level constraints of the OpenAI / vLLM APIs.
//   response_format {"type": "json_object"}      -> json_object_grammar()
//   response_format {"type": "json_schema", ...}  -> json_schema_grammar(schema)
//   guided_regex / structured_outputs.regex       -> regex_grammar(pattern)   (full match)
//   guided_choice / structured_outputs.choice     -> choice_grammar(choices)  (exactly one)
// Each throws ConstraintError (a client error: HTTP 400) naming what it cannot honour. Then
// compile(grammar, vocab) (compiled_grammar.h) once per constraint, and a GrammarMatcher
// (matcher.h) per request.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "structured/grammar.h"
#include "structured/json_schema.h"

namespace nanovllm::structured {

Grammar regex_grammar(std::string_view pattern, size_t max_states = 200000);
Grammar choice_grammar(const std::vector<std::string>& choices);

}  // namespace nanovllm::structured
