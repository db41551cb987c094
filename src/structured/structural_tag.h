// vLLM's / xgrammar's structural tag: free text, in which a trigger string starts a tagged
// structure that must then be one of the structures beginning with that trigger:
//   begin, a JSON value valid under schema, end
// after which free text resumes. Request form (response_format type "structural_tag", or
// structured_outputs.structural_tag as JSON text):
//   {"structures": [{"begin": "<function=f>", "schema": {...}, "end": "</function>"}],
//    "triggers": ["<function="]}
// The free text is any byte string that contains no trigger (an Aho-Corasick automaton over
// the triggers, byte-level); the output may end anywhere in free text, never inside a structure.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "structured/grammar.h"
#include "structured/json_schema.h"

namespace nanovllm::structured {

// `spec` is the {"structures", "triggers"} object. ConstraintError names what is wrong: no
// triggers, an empty trigger, a structure whose begin starts with no trigger, a trigger no
// structure begins with, an unsupported schema feature.
Grammar structural_tag_grammar(const nlohmann::ordered_json& spec, const JsonSchemaOptions& opt = {});

}  // namespace nanovllm::structured
