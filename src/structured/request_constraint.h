// The output constraint of a request, in two steps:
//  1. request_structured_outputs(body): finds the constraint an OpenAI / vLLM request body asks
//     for and returns it as SamplingParams::structured_outputs, from any of
//       response_format: {"type": "json_object"} | {"type": "json_schema", "json_schema": {"schema": ...}}
//                        ({"type": "text"}: none)
//       structured_outputs: {"json": schema | "schema text"} | {"regex": "..."} | {"choice": [...]}
//                           | {"json_object": true}, disable_any_whitespace        (vLLM >= 0.10)
//       guided_json, guided_regex, guided_choice                                  (older vLLM)
//     Throws ConstraintError naming the field for malformed or unsupported ones (guided_grammar,
//     structured_outputs.grammar, several constraints at once). tool_choice is separate (the
//     server fills structured_outputs.tools / tool_name).
//  2. constraint_for(params, format): a cache key (GrammarCache) and a grammar builder; the
//     builder throws ConstraintError for unsupported schema features (the server's 400).
// request_constraint(body) is both at once. Parse the body as nlohmann::ordered_json so that a
// schema's properties keep their order (the order the model is made to write them in).
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "chat/tool_call_format.h"
#include "nanovllm/sampling_params.h"
#include "structured/grammar.h"
#include "structured/json_schema.h"

namespace nanovllm::structured {

struct RequestConstraint {
  std::string param;  // the request field it came from, for messages ("response_format", ...)
  std::string key;    // identifies the grammar: equal keys, equal grammars
  std::function<Grammar()> build;
};

// Step 1; nullopt when the body asks for no constraint. `param` (if not null) gets the field name.
std::optional<StructuredOutputsParams> request_structured_outputs(const nlohmann::ordered_json& body,
                                                                  std::string* param = nullptr);

// Step 2; nullopt when params.empty(). `format` is the model's tool-call format (tools only).
// params.disable_any_whitespace overrides opt.max_whitespace with 0. Schema text is parsed with
// the bounded JSON parser (ConstraintError when malformed or nested too deeply).
std::optional<RequestConstraint> constraint_for(const StructuredOutputsParams& params,
                                                chat::ToolCallFormat format = chat::ToolCallFormat::kHermes,
                                                JsonSchemaOptions opt = {});

std::optional<RequestConstraint> request_constraint(const nlohmann::ordered_json& body,
                                                    const JsonSchemaOptions& opt = {});

}  // namespace nanovllm::structured
