// The output constraint an OpenAI / vLLM request body asks for, found in any of:
//   response_format: {"type": "json_object"} | {"type": "json_schema", "json_schema": {"schema": ...}}
//                    ({"type": "text"}: none)
//   structured_outputs: {"json": schema | "schema text"} | {"regex": "..."} | {"choice": [...]}
//                       | {"json_object": true}                                   (vLLM >= 0.10)
//   guided_json, guided_regex, guided_choice                                      (older vLLM)
// Returns a cache key (GrammarCache) and a builder; none when the body has no constraint.
// Throws ConstraintError naming the field for malformed or unsupported ones (guided_grammar,
// structured_outputs.grammar, several constraints at once). tool_choice is separate
// (tool_constraint.h: it needs the model's call format).
//
// Parse the body as nlohmann::ordered_json so that a schema's properties keep their order (the
// order the model is made to write them in).
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "structured/grammar.h"
#include "structured/json_schema.h"

namespace nanovllm::structured {

struct RequestConstraint {
  std::string param;  // the request field it came from, for messages ("response_format", ...)
  std::string key;    // identifies the grammar: equal keys, equal grammars
  std::function<Grammar()> build;
};

std::optional<RequestConstraint> request_constraint(const nlohmann::ordered_json& body,
                                                    const JsonSchemaOptions& opt = {});

}  // namespace nanovllm::structured
