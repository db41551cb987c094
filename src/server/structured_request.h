// The output constraint an OpenAI / vLLM request body asks for, as
// SamplingParams::structured_outputs (what the engine compiles: structured/output_constraint.h),
// from any of
//   response_format: {"type": "json_object"} | {"type": "json_schema", "json_schema": {"schema": ...}}
//                    ({"type": "text"}: none)
//   structured_outputs: {"json": schema | "schema text"} | {"regex": "..."} | {"choice": [...]}
//                       | {"json_object": true}, disable_any_whitespace        (vLLM >= 0.10)
//   guided_json, guided_regex, guided_choice                                  (older vLLM)
// Throws structured::ConstraintError naming the field for malformed or unsupported ones
// (guided_grammar, structured_outputs.grammar, several constraints at once). tool_choice is
// separate (request_features.cc fills structured_outputs.tools / tool_name). Parse the body as
// nlohmann::ordered_json so that a schema's properties keep their order (the order the model is
// made to write them in).
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "nanovllm/sampling_params.h"
#include "structured/json_schema.h"
#include "structured/output_constraint.h"

namespace nanovllm::server {

// nullopt when the body asks for no constraint. `param` (if not null) gets the field name.
std::optional<StructuredOutputsParams> request_structured_outputs(const nlohmann::ordered_json& body,
                                                                  std::string* param = nullptr);

// request_structured_outputs + structured::constraint_for (Hermes tool format) at once, its
// `param` the request field.
std::optional<structured::RequestConstraint> request_constraint(
    const nlohmann::ordered_json& body, const structured::JsonSchemaOptions& opt = {});

}  // namespace nanovllm::server
