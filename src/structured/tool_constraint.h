// Constraints for tool_choice "required" and a named function: the output must be tool calls in
// the model's own format (chat/tool_call_format.h), their JSON following the tools' parameter
// schemas.
//   kHermes:     <tool_call>\n{"name": N, "arguments": ARGS}\n</tool_call>, one or more
//                separated by "\n" (required), or exactly one of the named function.
//   kLlama3Json: {"name": N, "parameters": ARGS}, one or more separated by "; " (required), or
//                exactly one.
// ARGS follows the function's "parameters" schema (absent: an empty object). Bad tools or an
// unknown function name are a ConstraintError (400).
#pragma once
#include <nlohmann/json.hpp>

#include "chat/tool_call_format.h"
#include "structured/grammar.h"
#include "structured/json_schema.h"

namespace nanovllm::structured {

// The schema of one call object: anyOf over the tools (or only `only_name` when not empty) of
// {"name": {"const": name}, args_key: parameters}, both required, nothing else.
nlohmann::ordered_json tool_call_schema(const nlohmann::ordered_json& tools, const std::string& only_name,
                                        const std::string& args_key);

// tool_choice: "required" or {"type": "function", "function": {"name": ...}}.
Grammar tool_call_grammar(const nlohmann::ordered_json& tools, const nlohmann::ordered_json& tool_choice,
                          chat::ToolCallFormat format, const JsonSchemaOptions& opt = {});

}  // namespace nanovllm::structured
